"""Train one league role with SB3 PPO over real packets — read it top to bottom.

``python -m brawlkit train --role main ...`` (``training/cli.py``) and the notebook
``notebooks/train_role.ipynb`` both call :func:`train` with a :class:`TrainConfig`.

One run, step by step:

1. run directory: a fresh ``runs/<role>/<time>-s<seed>``, or the newest run of
   the role with ``resume=True`` (``training/checkpoints.py``);
2. opponents: the :class:`~brawlkit.league.CpuCurriculum` (its state resumes too);
3. envs: N :class:`~brawlkit.env.BrawlpitEnv`, each an arena of a shared
   :class:`~brawlkit.wire.server.ServerGroup` (one server process per core the
   trainer leaves free), stepped together by
   :class:`~brawlkit.env.vecenv.BrawlpitVecEnv`, plus two evaluation envs;
4. model: SB3 PPO with the network of :mod:`brawlkit.export.actor`, stamped with
   how it is trained (action repeat, input layout, reward preset) so the saved
   zip carries it;
5. per generation: ``learn`` for ``steps_per_generation`` env steps, evaluate the
   deterministic policy (what ships) against fixed CPU levels, save
   ``gen_XXXX.zip`` + ``gen_XXXX.json``.

Logs: CSV (``progress*.csv``) + TensorBoard in the run dir, keys ``train/*``,
``rollout/*``, ``reward/<tier>``, ``eval/win_rate/cpu_L``, ``play/spam_fraction``,
``curriculum/*`` (docs/cli.md lists them).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brawlkit.common.threads import limit_threads
from brawlkit.export.actor import network_description, policy_kwargs
from brawlkit.export.bpw import PolicyMeta
from brawlkit.league import CpuCurriculum
from brawlkit.training.checkpoints import (
    DEFAULT_RUNS_ROOT,
    find_resume_dir,
    generation_paths,
    list_checkpoints,
    new_run_dir,
    newest_metadata,
    now_iso,
    save_generation,
    stamp_model,
    update_best,
)
from brawlkit.training.config import TrainConfig

#: evaluation envs: two, whatever the training width (episodes alternate between them)
N_EVAL_ENVS = 2


@dataclass
class TrainResult:
    run_dir: Path
    checkpoints: list[Path] = field(default_factory=list)
    best_checkpoint: Path | None = None
    """the generation whose deterministic policy scored best (``best.json``): what to export"""
    evals: list[dict[str, Any]] = field(default_factory=list)
    total_timesteps: int = 0
    seconds: float = 0.0

    @property
    def final_checkpoint(self) -> Path | None:
        return self.checkpoints[-1] if self.checkpoints else None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "checkpoints": [str(p) for p in self.checkpoints],
            "final_checkpoint": str(self.final_checkpoint) if self.final_checkpoint else None,
            "best_checkpoint": str(self.best_checkpoint) if self.best_checkpoint else None,
            "evals": self.evals,
            "total_timesteps": self.total_timesteps,
            "seconds": round(self.seconds, 2),
        }


def policy_meta(cfg: TrainConfig) -> PolicyMeta:
    """How a policy trained with ``cfg`` must be played (recorded in zip and blob)."""
    return PolicyMeta(action_repeat=cfg.action_repeat, input_layout=cfg.input_layout,
                      reward=cfg.reward.partition(":")[0])


def build_model(cfg: TrainConfig, venv: Any) -> Any:
    """A fresh SB3 PPO of the project's network with ``cfg``'s hyperparameters."""
    from stable_baselines3 import PPO

    model = PPO(
        "MlpPolicy", venv, learning_rate=cfg.learning_rate, n_steps=cfg.ppo_n_steps(),
        batch_size=cfg.ppo_batch_size(), n_epochs=cfg.n_epochs, gamma=cfg.gamma,
        gae_lambda=cfg.gae_lambda, clip_range=cfg.clip_range, ent_coef=cfg.ent_coef,
        policy_kwargs=policy_kwargs(cfg.log_std_init), seed=cfg.seed, device="cpu", verbose=0,
    )
    stamp_model(model, policy_meta(cfg))
    return model


def scratch_checkpoint(path: str | Path, seed: int = 0, learn_steps: int = 128,
                       cfg: TrainConfig | None = None) -> Path:
    """A checkpoint of the project's shape without a game server: PPO on the
    zero-cost env for ``learn_steps`` (weights off their initialisation), saved with
    the metadata of ``cfg``.  For notebooks, benchmarks and tests."""
    from brawlkit.env.dummy import ZeroCostEnv

    cfg = cfg or TrainConfig(n_steps=64, batch_size=32, n_epochs=2)
    cfg = TrainConfig.from_dict({**cfg.to_dict(), "seed": seed, "n_envs": 1})
    model = build_model(cfg, ZeroCostEnv(random_obs=True, input_layout=cfg.input_layout))
    if learn_steps:
        model.learn(learn_steps)
    model.save(str(path))
    p = Path(path)
    return p if p.suffix == ".zip" else p.with_name(p.name + ".zip")


def _run_dir(cfg: TrainConfig, run_dir: str | Path | None, runs_root: str | Path,
              resume: bool) -> tuple[Path, dict[str, Any] | None]:
    """(run dir, metadata of the generation to resume from or None)."""
    if resume:
        rd = Path(run_dir) if run_dir else find_resume_dir(cfg.role, runs_root)
        if rd is None or not list_checkpoints(rd):
            raise FileNotFoundError(f"--resume: no checkpoint of role {cfg.role!r} under "
                                    f"{run_dir or Path(runs_root) / cfg.role}")
        return rd, newest_metadata(rd)
    rd = Path(run_dir) if run_dir else new_run_dir(cfg.role, cfg.seed, runs_root)
    if list_checkpoints(rd):
        raise FileExistsError(f"{rd} already holds checkpoints: pass resume=True (--resume) "
                              "or choose another run_dir")
    return rd, None


def _make_envs(cfg: TrainConfig, sampler: CpuCurriculum) -> tuple[Any, list[Any], Any]:
    """(training vec env, evaluation envs, the server group they play on or None).

    In-process envs are arenas of one shared server group (a server process per
    core the trainer leaves free); the evaluation envs are arenas there too.  With
    ``cfg.ray`` the training envs are Ray actors (brawlkit/distributed) and the
    evaluation envs arenas of a local server."""
    from stable_baselines3.common.vec_env import VecMonitor

    from brawlkit.env import BrawlpitEnv
    from brawlkit.env.rewards import make_reward
    from brawlkit.env.vecenv import NextOpponent, make_vec_env
    from brawlkit.wire.server import ServerGroup

    env_kw: dict[str, Any] = dict(mode="lockstep", action_repeat=cfg.action_repeat,
                                  input_layout=cfg.input_layout)
    group = None
    if cfg.ray is not None:
        from brawlkit.distributed.training import make_ray_envs

        venv = make_ray_envs(cfg, sampler)[0]
        try:
            n_eval = min(N_EVAL_ENVS, cfg.n_envs)
            group = ServerGroup(n_eval, servers=1)
            evals = [BrawlpitEnv(opponent="cpu:1", server=group.server_for(i), **env_kw)
                     for i in range(n_eval)]
        except BaseException:
            venv.close()
            if group is not None:
                group.close()
            raise
        return venv, evals, group
    if cfg.vec == "subproc":
        # the sampler lives in this process; each worker gets its picks pushed (one
        # episode late) and, being a process of its own, a server that never spins
        firsts = [sampler.sample() for _ in range(cfg.n_envs)]

        def env_fn(i: int) -> Any:
            return lambda: NextOpponent(BrawlpitEnv(
                opponent=firsts[i], reward=make_reward(cfg.reward), server_spin_us=0,
                max_episode_steps=cfg.max_episode_steps, **env_kw), firsts[i])
    else:
        group = ServerGroup(cfg.n_envs, servers=cfg.servers)

        def env_fn(i: int) -> Any:
            return lambda: BrawlpitEnv(
                opponent="cpu:1", opponent_sampler=sampler, reward=make_reward(cfg.reward),
                server=group.server_for(i), max_episode_steps=cfg.max_episode_steps, **env_kw)

    try:
        venv = VecMonitor(make_vec_env([env_fn(i) for i in range(cfg.n_envs)], vec=cfg.vec))
    except BaseException:
        if group is not None:
            group.close()
        raise
    try:
        n_eval = min(N_EVAL_ENVS, cfg.n_envs)
        if group is not None:
            evals = [BrawlpitEnv(opponent="cpu:1", server=group.server_for(i), **env_kw)
                     for i in range(n_eval)]
        else:
            evals = [BrawlpitEnv(opponent="cpu:1", parallel=n_eval, **env_kw) for _ in range(n_eval)]
    except BaseException:
        venv.close()
        if group is not None:
            group.close()
        raise
    return venv, evals, group


def _load_or_build(cfg: TrainConfig, venv: Any, rdir: Path,
                   resume_from: dict[str, Any] | None) -> tuple[Any, str | None]:
    """(model, parent checkpoint name): the resumed generation, or a fresh model."""
    if resume_from is None:
        return build_model(cfg, venv), None
    from stable_baselines3 import PPO

    gen = int(resume_from["generation"])
    zip_path = generation_paths(rdir, gen)[0]
    model = PPO.load(str(zip_path), env=venv, device="cpu")
    model.ent_coef = cfg.ent_coef
    model.set_random_seed(cfg.seed + gen + 1)
    stamp_model(model, policy_meta(cfg))
    # SB3's CSV writer truncates: keep the earlier part under its own name
    old = rdir / "progress.csv"
    if old.is_file():
        old.rename(rdir / f"progress_until_gen_{gen:04d}.csv")
    return model, zip_path.name


def _progress_bar(cfg: TrainConfig, enabled: bool) -> Any:
    if not enabled:
        return None
    # tqdm.auto: a widget bar inside Jupyter (one line in a papermill output
    # instead of hundreds of carriage-return updates), text in a terminal
    from tqdm.auto import tqdm

    return tqdm(total=cfg.generations * cfg.steps_per_generation, desc=f"train {cfg.role}",
                unit="step", mininterval=2.0, dynamic_ncols=True, file=sys.stderr)


def _log_evals(model: Any, gen: int, evals: dict[str, dict[str, Any]]) -> None:
    for name, ev in evals.items():
        model.logger.record(f"eval/win_rate/{name}", ev["win_rate"])
        model.logger.record(f"eval/sampled_win_rate/{name}", ev["sampled"]["win_rate"])
        model.logger.record(f"eval/draw_rate/{name}", ev["draw_rate"])
        model.logger.record(f"eval/spam_fraction/{name}", ev["spam_fraction"])
    model.logger.record("eval/generation", gen)
    model.logger.record("time/total_timesteps", model.num_timesteps)
    model.logger.dump(model.num_timesteps)


_EVAL_KEYS = ("episodes", "win_rate", "draw_rate", "loss_rate", "mean_stock_diff", "spam_fraction",
              "press_rate")


def _eval_record(ev: dict[str, Any]) -> dict[str, Any]:
    """A generation's evaluation against one level, as its metadata keeps it."""
    return {**{k: ev[k] for k in _EVAL_KEYS},
            "sampled_win_rate": ev["sampled"]["win_rate"],
            "sampled_press_rate": ev["sampled"]["press_rate"]}


def selection_score(evals: dict[str, dict[str, Any]]) -> float:
    """How good a generation is *as it ships*: the deterministic policy's mean win rate
    over the evaluated levels (the sampled policy never counts)."""
    return float(sum(ev["win_rate"] for ev in evals.values()) / max(len(evals), 1))


def train(cfg: TrainConfig | None = None, *, run_dir: str | Path | None = None,
          runs_root: str | Path = DEFAULT_RUNS_ROOT, resume: bool = False,
          progress: bool = True, league_dir: str | Path | None = None,
          registry: str | None = None, location: str | None = None,
          resume_if_any: bool = False, time_budget_s: float | None = None) -> TrainResult:
    """Train ``cfg.role`` for ``cfg.generations`` x ``cfg.steps_per_generation`` env steps.

    ``run_dir`` defaults to a fresh ``runs/<role>/<timestamp>-s<seed>``; with
    ``resume=True`` and no ``run_dir`` the role's run with the newest
    checkpoint continues (its generations, sampler state and logs).

    ``league_dir``: train as a member of that league (docs/league.md) — opponents
    from the role's PFSP sampler over the pool instead of the CPU curriculum, every
    generation registered there (zip, ``.bpw``, record) with the matches it played.

    ``registry``: the URL of a checkpoint registry (docs/registry.md) the league
    directory is kept in step with — every generation pushed (as ``location``,
    default the host name), the other locations' members pulled in; with
    ``resume=True`` and no local checkpoint of the role, the run continues from the
    role's newest checkpoint in the registry (a fresh Colab VM picks up where the
    last one stopped).

    ``resume_if_any``: resume when there is something to resume (a local run of the
    role, or with ``registry`` one in the registry), else start a new run — what a
    script that runs the same command on every machine wants.  ``time_budget_s``:
    stop after the generation past which another would overrun the budget (at most
    ``cfg.generations`` still).
    """
    cfg = cfg or TrainConfig()
    cfg.validate()
    limit_threads()
    from stable_baselines3.common.logger import configure

    from brawlkit.env.rewards import make_reward, reward_config
    from brawlkit.training.callbacks import TrainCallback
    from brawlkit.training.evaluate import evaluate_model

    reward_weights = reward_config(make_reward(cfg.reward))  # fails fast on a bad reward spec
    sync = None
    if registry is not None:
        if league_dir is None:
            raise ValueError("--registry needs --league-dir: the local pool the registry is "
                             "mirrored into (docs/registry.md)")
        from brawlkit.league.pool import LeagueDir
        from brawlkit.registry.sync import connect, fetch_resume_checkpoint

        sync = connect(registry, LeagueDir(league_dir), location)
        if ((resume or resume_if_any) and run_dir is None
                and find_resume_dir(cfg.role, runs_root) is None):
            fetch_resume_checkpoint(sync.client, cfg.role, runs_root)
    if resume_if_any:
        resume = bool(list_checkpoints(run_dir) if run_dir else find_resume_dir(cfg.role, runs_root))
    rdir, resume_from = _run_dir(cfg, run_dir, runs_root, resume)
    rdir.mkdir(parents=True, exist_ok=True)
    start_gen = int(resume_from["generation"]) + 1 if resume_from else 0

    league = None
    if league_dir is not None:
        if cfg.vec != "inproc" and cfg.ray is None:
            raise ValueError("a league run needs --vec inproc (or --ray): frozen opponents play "
                             "in the trainer's process (or in the Ray workers)")
        from brawlkit.league.trainee import LeagueTrainee

        league = LeagueTrainee(league_dir, cfg, rdir.name, seed=cfg.seed + start_gen, sync=sync)
        sampler: Any = league.sampler
    else:
        sampler = CpuCurriculum(k=cfg.curriculum_k, floor=cfg.curriculum_floor,
                                seed=cfg.seed + start_gen)
    if resume_from and resume_from.get("sampler"):
        sampler.load_state_dict(resume_from["sampler"])

    result = TrainResult(run_dir=rdir)
    t0 = time.perf_counter()
    venv, eval_envs, servers = _make_envs(cfg, sampler)
    pbar = None
    model = None
    try:
        model, parent = _load_or_build(cfg, venv, rdir, resume_from)
        model.set_logger(configure(str(rdir), ["csv", "tensorboard"]))
        pbar = _progress_bar(cfg, progress)
        callback: Any = TrainCallback(sampler, cfg.n_envs,
                                      push_opponents=cfg.vec == "subproc" and cfg.ray is None,
                                      pbar=pbar, on_episode=league.on_episode if league else None)
        if cfg.ray is not None:  # pool changes to the Ray workers between rollouts; losses logged
            from stable_baselines3.common.callbacks import CallbackList

            from brawlkit.distributed.training import RayCallback

            callback = CallbackList([callback, RayCallback(venv.venv)])
        member_parent = resume_from.get("member") if resume_from else None

        for gen in range(start_gen, start_gen + cfg.generations):
            g0 = time.perf_counter()
            steps_before = model.num_timesteps
            model.learn(total_timesteps=cfg.steps_per_generation, reset_num_timesteps=False,
                        callback=callback, log_interval=1, progress_bar=False)
            train_s = time.perf_counter() - g0
            evals = evaluate_model(model, cfg.eval_levels, cfg.eval_episodes, eval_envs,
                                   policy_meta(cfg))
            _log_evals(model, gen, evals)
            zip_path = save_generation(model, rdir, gen, {
                "role": cfg.role,
                "parent": parent,
                "steps": int(model.num_timesteps),
                "steps_this_generation": int(model.num_timesteps - steps_before),
                "created": now_iso(),
                "seed": cfg.seed,
                "config": cfg.to_dict(),
                "policy": {**network_description(), "obs_dim": int(venv.observation_space.shape[0]),
                           "act_dim": int(venv.action_space.shape[0]),
                           **vars(policy_meta(cfg))},
                "reward_config": reward_weights,
                "sampler": sampler.state_dict(),
                "eval": {k: _eval_record(v) for k, v in evals.items()},
                "selection_score": selection_score(evals),
                "member": league.member_id(gen) if league else None,
                "train_seconds": round(train_s, 2),
                "eval_seconds": round(time.perf_counter() - g0 - train_s, 2),
            })
            steps = int(model.num_timesteps)
            parent = zip_path.name
            result.checkpoints.append(zip_path)
            result.evals.append({"generation": gen, "steps": steps,
                                 **{k: v["win_rate"] for k, v in evals.items()},
                                 **{f"sampled_{k}": v["sampled"]["win_rate"] for k, v in evals.items()}})
            result.best_checkpoint = update_best(rdir, gen, zip_path, selection_score(evals))
            _report(pbar, gen, steps, evals, getattr(sampler, "max_level", None))
            if league is not None:
                member = league.register(gen, model, zip_path, policy_meta(cfg), member_parent, evals)
                member_parent = member.id
                if sampler.wants_reset(gen):  # exploiters start over from fresh weights
                    model = _fresh_weights(cfg, venv, gen, model.logger)
                    member_parent = None
            took = time.perf_counter() - g0
            if time_budget_s is not None and time.perf_counter() - t0 + took > time_budget_s:
                print(f"train: time budget of {time_budget_s:.0f}s reached after generation "
                      f"{gen}", file=sys.stderr)
                break
        result.total_timesteps = int(model.num_timesteps)
        if sync is not None and (sync.pending_members or sync.pending_matches):
            sync.push()  # one more try for what a down registry left queued
            if sync.pending_members or sync.pending_matches:
                print(f"train: registry {registry} unreachable at the end: "
                      f"{len(sync.pending_members)} member(s) and {len(sync.pending_matches)} "
                      f"match(es) are only in {league_dir}; `python -m brawlkit registry push "
                      f"--league-dir {league_dir} --url {registry}` sends them later",
                      file=sys.stderr)
    finally:
        if pbar is not None:
            pbar.close()
        for e in eval_envs:
            e.close()
        venv.close()
        if servers is not None:
            servers.close()
        result.seconds = time.perf_counter() - t0
        if model is not None:
            model.logger.close()
    return result


def _fresh_weights(cfg: TrainConfig, venv: Any, generation: int, logger: Any) -> Any:
    """A newly initialised model (an exploiter's reset after ``generation``), seeded from
    the run's seed and the generation so a rerun resets to the same weights. It keeps
    the run's logger: a new one would truncate ``progress.csv`` and lose the log of every
    generation before the reset."""
    seed = cfg.seed + 7919 * (generation + 1)
    model = build_model(TrainConfig.from_dict({**cfg.to_dict(), "seed": seed}), venv)
    model.set_logger(logger)
    return model


def _report(pbar: Any, gen: int, steps: int, evals: dict[str, dict[str, Any]],
            level: int | None) -> None:
    """One line per generation: each level's win rate, deterministic/sampled."""
    rates = {k: f"{v['win_rate']:.2f}/{v['sampled']['win_rate']:.2f}" for k, v in evals.items()}
    if pbar is not None:
        pbar.set_postfix(rates | ({"lvl": level} if level is not None else {}))
    else:
        print(f"gen {gen}: steps {steps} win rate deterministic/sampled "
              + " ".join(f"{k}={v}" for k, v in rates.items())
              + (f" max_level={level}" if level is not None else ""), file=sys.stderr, flush=True)
