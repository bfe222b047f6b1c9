"""Train one league role with SB3 PPO over real packets — read it top to bottom.

``python -m brawlkit train --role main ...`` (``training/cli.py``) and the notebook
``notebooks/train_role.ipynb`` both call :func:`train` with a :class:`TrainConfig`.

One run, step by step (the steps of :func:`train`, in order):

1. registry: with ``--registry``, connect, and fetch the role's newest checkpoint
   when there is nothing local to resume (``training/checkpoints.py``);
2. run directory: a fresh ``runs/<role>/<time>-s<seed>``, or the newest run of
   the role with ``resume=True``;
3. opponents: the :class:`~brawlkit.league.CpuCurriculum`, with ``--opponent`` that
   one opponent alone (:class:`~brawlkit.league.curriculum.SingleOpponent`), or with
   ``--league-dir`` the role's league sampler
   (:class:`~brawlkit.training.league_member.LeagueTrainee`); its state resumes too;
4. envs: :class:`~brawlkit.training.envs.TrainingEnvs` — the N training envs (arenas
   of a shared server group, stepped together through the fast lane; or subprocess
   or Ray envs) and two evaluation envs;
5. model: SB3 PPO with the network of :mod:`brawlkit.export.actor`, stamped with
   how it is trained (action repeat, input layout, reward preset) so the saved
   zip carries it — or the resumed generation's (fresh weights, when that
   generation ended with an exploiter's reset); with ``--init-from`` a new run's
   starts from that checkpoint's weights (``training/warmstart.py``), and with
   ``--kl-coef`` its loss has a KL term toward that policy (``training/kl.py``);
6. per generation (:meth:`_Generations.run`): ``learn`` for ``steps_per_generation``
   env steps, evaluate the deterministic policy (what ships) against fixed CPU
   levels, save ``gen_XXXX.zip`` + ``gen_XXXX.json``, register the member in the
   league, reset an exploiter's weights when its sampler asks.

Logs: CSV (``progress*.csv``) + TensorBoard in the run dir, keys ``train/*``,
``rollout/*``, ``reward/<tier>``, ``eval/win_rate/cpu_L``, ``play/spam_fraction``,
``curriculum/*`` (docs/cli.md lists them).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stable_baselines3.common.logger import configure

from brawlkit.common.io import Closing
from brawlkit.common.stats import wilson_interval
from brawlkit.common.threads import limit_threads
from brawlkit.env.dummy import ZeroCostEnv
from brawlkit.env.rewards import make_reward, reward_config
from brawlkit.export.actor import network_description, policy_kwargs
from brawlkit.export.bpw import PolicyMeta
from brawlkit.league.curriculum import CpuCurriculum, SingleOpponent
from brawlkit.league.directory import LeagueDir
from brawlkit.league.opponents import fixed_opponent
from brawlkit.registry.sync import RegistrySync, connect
from brawlkit.training.callbacks import TrainCallback
from brawlkit.training.checkpoints import (
    fetch_resume_checkpoint,
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
from brawlkit.training.config import RunOptions, TrainConfig, resumed_config
from brawlkit.training.envs import TrainingEnvs
from brawlkit.training.evaluate import evaluate_model
from brawlkit.training.kl import attach_reference, ppo_class
from brawlkit.training.league_member import LeagueTrainee
from brawlkit.training.warmstart import InitCheckpoint, check_init_from, load_init_weights


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

    def add(self, gen: int, zip_path: Path, steps: int, evals: dict[str, dict[str, Any]],
            best: Path) -> None:
        """Record a finished generation: its checkpoint, its win rates, the best so far."""
        self.checkpoints.append(zip_path)
        self.evals.append({"generation": gen, "steps": steps,
                           **{k: v["win_rate"] for k, v in evals.items()},
                           **{f"sampled_{k}": v["sampled"]["win_rate"] for k, v in evals.items()}})
        self.best_checkpoint = best

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


def ppo_hyperparameters(cfg: TrainConfig) -> dict[str, Any]:
    """SB3 PPO's hyperparameters from ``cfg``: what a fresh model is built with and what
    a resumed one is loaded with (so a flag given on a resume takes effect)."""
    return dict(learning_rate=cfg.learning_rate, n_steps=cfg.ppo_n_steps(),
                batch_size=cfg.ppo_batch_size(), n_epochs=cfg.n_epochs, gamma=cfg.gamma,
                gae_lambda=cfg.gae_lambda, clip_range=cfg.clip_range, ent_coef=cfg.ent_coef)


def build_model(cfg: TrainConfig, venv: Any) -> Any:
    """A fresh SB3 PPO of the project's network with ``cfg``'s hyperparameters (with
    ``cfg.kl_coef`` > 0 the KL-penalised subclass, its reference attached: kl.py)."""
    model = ppo_class(cfg)(
        "MlpPolicy", venv, **ppo_hyperparameters(cfg),
        policy_kwargs=policy_kwargs(cfg.log_std_init, cfg.hidden), seed=cfg.seed, device="cpu", verbose=0,
    )
    configure_loop(model, cfg)
    stamp_model(model, policy_meta(cfg))
    attach_reference(model, cfg)
    return model


def configure_loop(model: Any, cfg: TrainConfig) -> None:
    """How ``model``'s loop runs in this process (``cfg.pipeline``, ``cfg.async_update``):
    not saved in its checkpoint, so set on every model built or loaded to train."""
    model.pipeline = cfg.pipeline
    model.async_update = cfg.async_update
    if cfg.async_update:
        model.start_update_worker()


def scratch_checkpoint(path: str | Path, seed: int = 0, learn_steps: int = 128,
                       cfg: TrainConfig | None = None) -> Path:
    """A checkpoint of the project's shape without a game server: PPO on the
    zero-cost env for ``learn_steps`` (weights off their initialisation), saved with
    the metadata of ``cfg``.  For notebooks, benchmarks and tests."""

    cfg = cfg or TrainConfig(n_steps=64, batch_size=32, n_epochs=2)
    cfg = TrainConfig.from_dict({**cfg.to_dict(), "seed": seed, "n_envs": 1, "async_update": False})
    model = build_model(cfg, ZeroCostEnv(random_obs=True, input_layout=cfg.input_layout))
    if learn_steps:
        model.learn(learn_steps)
    model.save(str(path))
    p = Path(path)
    return p if p.suffix == ".zip" else p.with_name(p.name + ".zip")


def train(cfg: TrainConfig | None = None, options: RunOptions | None = None,
          **run_options: Any) -> TrainResult:
    """Train ``cfg.role`` for ``cfg.generations`` x ``cfg.steps_per_generation`` env steps.

    ``options`` (or its fields as keywords: ``train(cfg, run_dir=..., league_dir=...)``)
    says where the run lives and how it reports (:class:`RunOptions`): a fresh run
    dir ``runs/<role>/<timestamp>-s<seed>`` by default; ``resume=True`` continues the
    role's run with the newest checkpoint (its generations, sampler state and logs);
    ``league_dir`` trains as a member of that league (docs/league.md: opponents from
    the role's sampler over the pool, every generation registered there with the
    matches it played); ``registry`` keeps the league directory in step with a
    checkpoint registry (docs/registry.md), and with ``resume`` and no local run
    continues from the role's newest registry checkpoint (a fresh Colab VM picks up
    where the last one stopped); ``time_budget_s`` stops after the generation past
    which another would overrun the budget (at most ``cfg.generations`` still).
    """
    cfg = cfg or TrainConfig()
    cfg.validate()
    opts = dataclasses.replace(options or RunOptions(), **run_options)
    opts.validate()
    init = check_init_from(cfg)  # --init-from: refused here, before any server starts
    single = _single_opponent(cfg, opts)  # --opponent: likewise
    limit_threads()
    reward_weights = reward_config(make_reward(cfg.reward))  # fails fast on a bad reward spec
    sync = _connect_registry(cfg, opts)
    rdir, resume_from = _open_run_dir(cfg, opts)
    if resume_from is not None:  # the run's own settings, but for what this call changes
        cfg = _resumed(cfg, opts, rdir, resume_from)
        reward_weights = reward_config(make_reward(cfg.reward))
    start_gen = int(resume_from["generation"]) + 1 if resume_from else 0
    league, sampler = _opponents(cfg, opts, rdir.name, start_gen, resume_from, sync, single)
    result = TrainResult(run_dir=rdir)
    t0 = time.perf_counter()
    try:
        with TrainingEnvs(cfg, sampler) as envs, _progress_bar(cfg, opts.progress) as pbar:
            run = _Generations(cfg, envs, rdir, resume_from, sampler, league, reward_weights,
                               pbar, init)
            with run:
                for gen in range(start_gen, start_gen + cfg.generations):
                    took = run.run(gen, result)
                    if _over_budget(opts.time_budget_s, time.perf_counter() - t0, took, gen):
                        break
                result.total_timesteps = int(run.model.num_timesteps)
            _flush_registry(sync, opts)
    finally:
        result.seconds = time.perf_counter() - t0
    return result


def _connect_registry(cfg: TrainConfig, opts: RunOptions) -> RegistrySync | None:
    """The registry sync of ``--registry`` (None without); with ``--resume`` (or
    ``--resume-or-new``) and no local run of the role, the role's newest registry
    checkpoint is put where the local resume finds it."""
    if opts.registry is None:
        return None
    assert opts.league_dir is not None  # RunOptions.validate
    sync = connect(opts.registry, LeagueDir(opts.league_dir), opts.location)
    if ((opts.resume or opts.resume_if_any) and opts.run_dir is None
            and find_resume_dir(cfg.role, opts.runs_root) is None):
        fetch_resume_checkpoint(sync.client, cfg.role, opts.runs_root)
    return sync


def _open_run_dir(cfg: TrainConfig, opts: RunOptions) -> tuple[Path, dict[str, Any] | None]:
    """(run dir, metadata of the generation to resume from or None); the dir exists."""
    resume = opts.resume
    if opts.resume_if_any:
        resume = bool(list_checkpoints(opts.run_dir) if opts.run_dir
                      else find_resume_dir(cfg.role, opts.runs_root))
    if resume:
        rd = Path(opts.run_dir) if opts.run_dir else find_resume_dir(cfg.role, opts.runs_root)
        if rd is None or not list_checkpoints(rd):
            raise FileNotFoundError(f"--resume: no checkpoint of role {cfg.role!r} under "
                                    f"{opts.run_dir or Path(opts.runs_root) / cfg.role}")
        return rd, newest_metadata(rd)
    rd = Path(opts.run_dir) if opts.run_dir else new_run_dir(cfg.role, cfg.seed, opts.runs_root)
    if list_checkpoints(rd):
        raise FileExistsError(f"{rd} already holds checkpoints: pass resume=True (--resume) "
                              "or choose another run_dir")
    rd.mkdir(parents=True, exist_ok=True)
    return rd, None


def _resumed(cfg: TrainConfig, opts: RunOptions, rdir: Path,
             resume_from: dict[str, Any]) -> TrainConfig:
    """The config the resumed run continues with (:func:`resumed_config`); says on
    stderr which of the run's settings this call changes."""
    new, changes = resumed_config(cfg, resume_from.get("config") or {}, opts.chosen)
    if new.kl_coef > 0 and new.init_from and not Path(new.init_from).is_file():
        # e.g. resumed from a registry on a fresh machine, the clone left behind
        raise FileNotFoundError(
            f"the resumed run's KL term (kl_coef {new.kl_coef}) pulls toward its --init-from "
            f"{new.init_from}, which is not on this machine: pass --init-from CKPT (that "
            "checkpoint) or --kl-coef 0")
    gen = int(resume_from["generation"])
    print(f"resume {rdir} after generation {gen}: the run's settings"
          + (f", changed by this call: {'; '.join(changes)}" if changes else ", none changed"),
          file=sys.stderr)
    return new


def _single_opponent(cfg: TrainConfig, opts: RunOptions) -> SingleOpponent | None:
    """``--opponent``'s sampler (None without one), its ``.bpw`` read and checked."""
    if cfg.opponent is None:
        return None
    if opts.league_dir is not None:
        raise ValueError(f"--opponent {cfg.opponent} and --league-dir exclude each other: a "
                         "league member draws its opponents from the pool")
    return SingleOpponent(fixed_opponent(cfg.opponent, cfg.input_layout, cfg.action_repeat,
                                         cfg.seed), seed=cfg.seed)


def _opponents(cfg: TrainConfig, opts: RunOptions, run_name: str, start_gen: int,
               resume_from: dict[str, Any] | None, sync: RegistrySync | None,
               single: SingleOpponent | None = None) -> tuple[LeagueTrainee | None, Any]:
    """(the league side of the run or None, the opponent sampler: ``single``, the
    league's or the CPU curriculum), its state resumed."""
    league = None
    if single is not None:
        sampler: Any = single
    elif opts.league_dir is not None:
        if cfg.vec != "inproc" and cfg.ray is None:
            raise ValueError("a league run needs --vec inproc (or --ray): frozen opponents play "
                             "in the trainer's process (or in the Ray workers)")
        league = LeagueTrainee(opts.league_dir, cfg, run_name, seed=cfg.seed + start_gen,
                               sync=sync)
        sampler = league.sampler
    else:
        sampler = CpuCurriculum(k=cfg.curriculum_k, floor=cfg.curriculum_floor,
                                seed=cfg.seed + start_gen)
    if resume_from and resume_from.get("sampler"):
        sampler.load_state_dict(resume_from["sampler"])
    return league, sampler


class _Generations(Closing):
    """The model of one run and what every generation does with it (:meth:`run`)."""

    def __init__(self, cfg: TrainConfig, envs: TrainingEnvs, rdir: Path,
                 resume_from: dict[str, Any] | None, sampler: Any,
                 league: LeagueTrainee | None, reward_weights: dict[str, Any],
                 pbar: Any, init: InitCheckpoint | None = None) -> None:
        self.cfg, self.envs, self.rdir = cfg, envs, rdir
        self.sampler, self.league, self.reward_weights, self.pbar = (sampler, league,
                                                                     reward_weights, pbar)
        self.model, self.parent, self.member_parent = _load_or_build(cfg, envs.venv, rdir,
                                                                     resume_from, init)
        self.callback = envs.callback(TrainCallback(
            sampler, cfg.n_envs, push_opponents=cfg.vec == "subproc" and cfg.ray is None,
            pbar=pbar, on_episode=league.on_episode if league else None))

    def run(self, gen: int, result: TrainResult) -> float:
        """Train, evaluate, save and register generation ``gen``; its seconds."""
        cfg, model = self.cfg, self.model
        g0 = time.perf_counter()
        steps_before = model.num_timesteps
        model.learn(total_timesteps=cfg.steps_per_generation, reset_num_timesteps=False,
                    callback=self.callback, log_interval=1, progress_bar=False)
        train_s = time.perf_counter() - g0
        evals = evaluate_model(model, cfg.eval_levels, cfg.eval_episodes, self.envs.evals,
                               policy_meta(cfg))
        # Main's verification against its exploiters (--main-verify-matches), before the
        # save so the sampler state it leaves is the checkpoint's
        verified = self.league.verify(model, policy_meta(cfg), self.envs.evals) \
            if self.league is not None else {}
        _log_evals(model, gen, evals, verified)
        # decided before saving, so the metadata (and its sampler state) says what follows
        reset = self.league is not None and self.sampler.wants_reset(gen)
        zip_path = save_generation(model, self.rdir, gen, {
            **self._metadata(gen, steps_before, evals, reset),
            "train_seconds": round(train_s, 2),
            "eval_seconds": round(time.perf_counter() - g0 - train_s, 2),
        })
        result.add(gen, zip_path, int(model.num_timesteps), evals,
                   update_best(self.rdir, gen, zip_path, selection_score(evals)))
        _report(self.pbar, gen, int(model.num_timesteps), evals,
                getattr(self.sampler, "max_level", None))
        self.parent = zip_path.name
        if self.league is not None:
            member = self.league.register(gen, model, zip_path, policy_meta(cfg),
                                          self.member_parent, evals)
            self.member_parent = member.id
        if reset:  # an exploiter starts over from fresh weights: no parent, in both lineages
            model.close_update_worker()
            self.model = _fresh_weights(cfg, self.envs.venv, gen, model.logger)
            self.parent = self.member_parent = None
        return time.perf_counter() - g0

    def _metadata(self, gen: int, steps_before: int, evals: dict[str, dict[str, Any]],
                  reset: bool) -> dict[str, Any]:
        cfg, model, venv = self.cfg, self.model, self.envs.venv
        return {
            "role": cfg.role,
            "parent": self.parent,
            "steps": int(model.num_timesteps),
            "steps_this_generation": int(model.num_timesteps - steps_before),
            "created": now_iso(),
            "seed": cfg.seed,
            "config": cfg.to_dict(),
            "policy": {**network_description(cfg.hidden), "obs_dim": int(venv.observation_space.shape[0]),
                       "act_dim": int(venv.action_space.shape[0]), **vars(policy_meta(cfg))},
            "reward_config": self.reward_weights,
            "sampler": self.sampler.state_dict(),
            "eval": {k: _eval_record(v) for k, v in evals.items()},
            "selection_score": selection_score(evals),
            "member": self.league.member_id(gen) if self.league else None,
            "reset_after": reset,
            "lane": self.envs.lane_stats(),
        }

    def close(self) -> None:
        self.model.close_update_worker()
        self.model.logger.close()


def _over_budget(budget_s: float | None, elapsed_s: float, took_s: float, gen: int) -> bool:
    """Would another generation as long as the last one overrun the time budget?"""
    if budget_s is None or elapsed_s + took_s <= budget_s:
        return False
    print(f"train: time budget of {budget_s:.0f}s reached after generation {gen}",
          file=sys.stderr)
    return True


def _flush_registry(sync: RegistrySync | None, opts: RunOptions) -> None:
    """One more push of what a down registry left queued; say what stays local."""
    if sync is None or not (sync.pending_members or sync.pending_matches):
        return
    sync.push()
    if sync.pending_members or sync.pending_matches:
        print(f"train: registry {opts.registry} unreachable at the end: "
              f"{len(sync.pending_members)} member(s) and {len(sync.pending_matches)} "
              f"match(es) are only in {opts.league_dir}; `python -m brawlkit registry push "
              f"--league-dir {opts.league_dir} --url {opts.registry}` sends them later",
              file=sys.stderr)


def _load_or_build(cfg: TrainConfig, venv: Any, rdir: Path, resume_from: dict[str, Any] | None,
                   init: InitCheckpoint | None = None) -> tuple[Any, str | None, str | None]:
    """(model, parent checkpoint name, parent member id), its logger writing to ``rdir``:
    a fresh model (with ``init``: the --init-from checkpoint's weights, which is then
    the parent), the resumed generation's, or — when the resumed generation ended
    with an exploiter's reset — the same fresh weights the uninterrupted run had."""
    if resume_from is None:
        model = build_model(cfg, venv)
        model.set_logger(configure(str(rdir), ["csv", "tensorboard"]))
        if init is None:
            return model, None, None
        load_init_weights(model, init)
        return model, str(init.path), init.member
    gen = int(resume_from["generation"])
    # SB3's CSV writer truncates: keep the earlier part under its own name
    old = rdir / "progress.csv"
    if old.is_file():
        old.rename(rdir / f"progress_until_gen_{gen:04d}.csv")
    logger = configure(str(rdir), ["csv", "tensorboard"])
    if resume_from.get("reset_after"):
        return _fresh_weights(cfg, venv, gen, logger), None, None
    zip_path = generation_paths(rdir, gen)[0]
    model = ppo_class(cfg).load(str(zip_path), env=venv, device="cpu", **ppo_hyperparameters(cfg))
    configure_loop(model, cfg)
    attach_reference(model, cfg)
    model.set_random_seed(cfg.seed + gen + 1)
    stamp_model(model, policy_meta(cfg))
    model.set_logger(logger)
    return model, zip_path.name, resume_from.get("member")


def _progress_bar(cfg: TrainConfig, enabled: bool) -> Any:
    """A context manager: the run's progress bar, or nothing."""
    if not enabled:
        return contextlib.nullcontext()
    # a widget bar inside Jupyter (one line in a papermill output instead of hundreds of
    # carriage-return updates), text on a terminal, plain lines in a log (common/progress.py)
    from brawlkit.common.progress import progress_bar

    return progress_bar(cfg.generations * cfg.steps_per_generation, f"train {cfg.role}", "step",
                        mininterval=2.0, dynamic_ncols=True)


def _log_evals(model: Any, gen: int, evals: dict[str, dict[str, Any]],
               verified: dict[str, float] | None = None) -> None:
    for name, ev in evals.items():
        model.logger.record(f"eval/win_rate/{name}", ev["win_rate"])
        model.logger.record(f"eval/sampled_win_rate/{name}", ev["sampled"]["win_rate"])
        model.logger.record(f"eval/draw_rate/{name}", ev["draw_rate"])
        model.logger.record(f"eval/spam_fraction/{name}", ev["spam_fraction"])
    if verified:  # the deterministic policy against the exploiters it was verified on
        model.logger.record("eval/verified/min_win_rate", min(verified.values()))
        model.logger.record("eval/verified/mean_win_rate", sum(verified.values()) / len(verified))
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
    """How good a generation is *as it ships*, and how sure: the 95 % Wilson lower bound
    of the deterministic policy's wins over every evaluated match (the sampled policy
    never counts).  A lower bound, not the mean, so a generation that won 4 of 4 does
    not displace one that won 38 of 40 (docs/cli.md, "Which checkpoint to ship")."""
    wins = sum(int(ev["wins"]) for ev in evals.values())
    n = sum(int(ev["episodes"]) for ev in evals.values())
    return round(wilson_interval(wins, n)[0], 6)


def _fresh_weights(cfg: TrainConfig, venv: Any, generation: int, logger: Any) -> Any:
    """The model an exploiter starts over with after ``generation``: newly initialised,
    seeded from the run's seed and the generation so a rerun — or a resume — resets to
    the same weights; with ``--init-from``, that checkpoint's weights again (as
    AlphaStar's exploiters reset to the supervised agent, not to random play). It keeps
    the run's logger: a new one would truncate ``progress.csv`` and lose the log of
    every generation before the reset."""
    seed = cfg.seed + 7919 * (generation + 1)
    model = build_model(TrainConfig.from_dict({**cfg.to_dict(), "seed": seed}), venv)
    init = check_init_from(cfg)
    if init is not None:
        load_init_weights(model, init)
    model.set_logger(logger)
    return model


def _report(pbar: Any, gen: int, steps: int, evals: dict[str, dict[str, Any]],
            level: int | None) -> None:
    """One line per generation: each level's win rate, deterministic/sampled."""
    rates = {k: f"{v['win_rate']:.2f}/{v['sampled']['win_rate']:.2f}" for k, v in evals.items()}
    if pbar is not None and not isinstance(pbar, contextlib.nullcontext):
        pbar.set_postfix(rates | ({"lvl": level} if level is not None else {}))
    else:
        print(f"gen {gen}: steps {steps} win rate deterministic/sampled "
              + " ".join(f"{k}={v}" for k, v in rates.items())
              + (f" max_level={level}" if level is not None else ""), file=sys.stderr, flush=True)
