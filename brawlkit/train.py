"""Train one league role with SB3 PPO over real packets.

``python -m brawlkit train --role main [--generations N] [--steps-per-generation N] ...``
and the notebook ``notebooks/train_role.ipynb`` both call :func:`train`.

* Policy: ``MlpPolicy`` with a 31→64→64→6 tanh actor (and a 64-64 tanh
  critic), no VecNormalize — exactly what ``brawlkit.export`` writes to the
  native ``.bpw`` blob.
* Envs: N :class:`~brawlkit.env.BrawlpitEnv` (one server each) stepped by
  :class:`~brawlkit.vecenv.BrawlpitVecEnv` (all commands out before any
  snapshot is read) or, with ``vec="subproc"``, SB3's ``SubprocVecEnv``.
* Opponents: an :class:`OpponentSampler` hook.  For now the
  :class:`CpuCurriculum` over the built-in CPU levels: level L+1 unlocks once
  the trainee wins at least half of its last K games at level L; unlocked
  levels are sampled ∝ max(p(1−p), floor) of the trainee's recent win rate p
  (no games = 0.5), so most games are evenly matched and no level starves.
  The record lives in this process, fed by every env through
  ``info["opponent"]`` / ``info["outcome"]`` in :class:`TrainCallback`.
* Generations: each ends with ``gen_XXXX.zip`` + ``gen_XXXX.json`` (metadata,
  evaluation vs fixed CPU levels with the deterministic policy) in the run dir
  ``runs/<role>/<run>/``; ``resume=True`` continues from the newest.
* Logs: CSV (``progress*.csv``) + TensorBoard in the run dir.  Keys:
  ``train/entropy_loss``, ``train/std``, ``train/approx_kl``,
  ``rollout/ep_rew_mean``, ``reward/<tier>`` (episode sums, averaged),
  ``eval/win_rate/cpu_L``, ``play/spam_fraction``, ``curriculum/*``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.evaluate import action_patterns, numpy_actor, play_episodes, spam_fraction
from brawlkit.server import auto_spin_us
from brawlkit.vecenv import DEFAULT_VEC, VEC_KINDS, limit_threads

ROLES = ("main", "main_exploiter", "league_exploiter")
DEFAULT_ENT_COEF = 0.003
DEFAULT_RUNS_ROOT = "runs"
N_PATTERNS = 144


# =========================================================================== opponents
class OpponentSampler:
    """The opponent-sampling hook: ``sample()`` picks, ``record()`` learns.

    The trainer calls :meth:`sample` at every episode start (directly, as the
    env's ``opponent_sampler``, or via ``set_next_opponent`` for subprocess
    envs) and :meth:`record` with every finished episode's
    ``info["opponent"]`` and ``info["outcome"]``.  The league adds checkpoint
    opponents by subclassing this (PFSP weights over the pool).
    """

    def sample(self) -> str:
        raise NotImplementedError

    def record(self, opponent: str, outcome: str) -> None:
        raise NotImplementedError

    def __call__(self) -> str:  # BrawlpitEnv(opponent_sampler=...) calls it
        return self.sample()

    def stats(self) -> dict[str, float]:
        """Numbers worth logging (``curriculum/<key>``)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


class CpuCurriculum(OpponentSampler):
    """Curriculum over the built-in CPU levels.

    Args:
        levels: the CPU levels in order of difficulty (default 1..8).
        k: unlock window — level L+1 unlocks when the trainee has won at least
            ``unlock_win_rate`` of its last ``k`` games (draws count as not won)
            at the highest unlocked level L.  Also the window of the win rate p
            used for sampling.
        floor: minimum sampling weight, so a mastered (p≈1) or hopeless (p≈0)
            level still gets games (p(1−p) peaks at 0.25).
        start: how many levels are unlocked at the start (default 1).
    """

    def __init__(
        self, levels: Sequence[int] = tuple(range(1, 9)), k: int = 20, floor: float = 0.05,
        unlock_win_rate: float = 0.5, start: int = 1, seed: int | None = None,
    ) -> None:
        self.levels = [int(x) for x in levels]
        self.k = int(k)
        self.floor = float(floor)
        self.unlock_win_rate = float(unlock_win_rate)
        self.unlocked = max(1, min(int(start), len(self.levels)))
        self.rng = np.random.default_rng(seed)
        self.recent: dict[str, deque[int]] = {self.name(lv): deque(maxlen=self.k) for lv in self.levels}
        self.totals: dict[str, dict[str, int]] = {
            self.name(lv): {"win": 0, "draw": 0, "loss": 0} for lv in self.levels}

    @staticmethod
    def name(level: int) -> str:
        return f"cpu:{level}"

    def win_rate(self, opponent: str) -> float:
        """Recent win rate p (last k games); no games counts as 0.5."""
        h = self.recent.get(opponent)
        return float(np.mean(h)) if h else 0.5

    def weights(self) -> dict[str, float]:
        names = [self.name(lv) for lv in self.levels[: self.unlocked]]
        w = np.array([max(p * (1 - p), self.floor) for p in map(self.win_rate, names)])
        return dict(zip(names, (w / w.sum()).tolist(), strict=True))

    def sample(self) -> str:
        w = self.weights()
        names = list(w)
        return names[int(self.rng.choice(len(names), p=list(w.values())))]

    def record(self, opponent: str, outcome: str) -> None:
        if opponent not in self.recent or outcome not in ("win", "draw", "loss"):
            return
        self.recent[opponent].append(1 if outcome == "win" else 0)
        self.totals[opponent][outcome] += 1
        top = self.name(self.levels[self.unlocked - 1])
        h = self.recent[top]
        if (opponent == top and self.unlocked < len(self.levels) and len(h) >= self.k
                and sum(h) >= self.unlock_win_rate * self.k):
            self.unlocked += 1

    @property
    def max_level(self) -> int:
        return self.levels[self.unlocked - 1]

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {"max_level": float(self.max_level)}
        for lv in self.levels[: self.unlocked]:
            out[f"win_rate/cpu_{lv}"] = self.win_rate(self.name(lv))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "cpu_curriculum", "levels": self.levels, "k": self.k, "floor": self.floor,
            "unlock_win_rate": self.unlock_win_rate, "unlocked": self.unlocked,
            "recent": {k: list(v) for k, v in self.recent.items()},
            "totals": self.totals,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.unlocked = int(state.get("unlocked", self.unlocked))
        for k, v in state.get("recent", {}).items():
            if k in self.recent:
                self.recent[k].extend(int(x) for x in v[-self.k:])
        for k, v in state.get("totals", {}).items():
            if k in self.totals:
                self.totals[k].update({o: int(n) for o, n in v.items()})
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]


# =========================================================================== config
@dataclass
class TrainConfig:
    """Everything a run depends on; stored in every checkpoint's JSON."""

    role: str = "main"
    generations: int = 3
    steps_per_generation: int = 100_000
    n_envs: int = 2
    ent_coef: float = DEFAULT_ENT_COEF
    league_dir: str | None = None
    registry_url: str | None = None
    seed: int = 0
    reward: str = "tiered"
    vec: str = DEFAULT_VEC
    # PPO
    learning_rate: float = 3e-4
    n_steps: int = 1024
    batch_size: int = 256
    n_epochs: int = 5
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    log_std_init: float = 0.0
    """initial log std of the Gaussian policy (SB3 default 0 = std 1). Buttons are
    pressed when their value > 0, so with std 1 early play is mostly noise and the
    *deterministic* policy (the mean, what the C bot plays) can lag far behind the
    stochastic one; a smaller start makes the mean carry the behaviour sooner."""
    # env
    action_repeat: int = 4
    max_episode_steps: int | None = None
    """cut training episodes short (truncated, not a result) — for tiny test runs only"""
    # curriculum
    curriculum_k: int = 10
    curriculum_floor: float = 0.05
    # evaluation at each generation's end
    eval_levels: tuple[int, ...] = (1, 3, 5)
    eval_episodes: int = 4

    def validate(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        if self.vec not in VEC_KINDS:
            raise ValueError(f"vec must be one of {VEC_KINDS}, got {self.vec!r}")
        if self.generations < 1 or self.steps_per_generation < 1 or self.n_envs < 1:
            raise ValueError("generations, steps_per_generation and n_envs must be >= 1")
        if self.ent_coef < 0:
            raise ValueError("ent_coef must be >= 0")

    def ppo_n_steps(self) -> int:
        """Rollout length per env: the configured value, shrunk so one generation
        holds at least one rollout (tiny test runs)."""
        return max(8, min(self.n_steps, self.steps_per_generation // self.n_envs))

    def ppo_batch_size(self) -> int:
        return max(8, min(self.batch_size, self.ppo_n_steps() * self.n_envs))


@dataclass
class TrainResult:
    run_dir: Path
    checkpoints: list[Path] = field(default_factory=list)
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
            "evals": self.evals,
            "total_timesteps": self.total_timesteps,
            "seconds": round(self.seconds, 2),
        }


# =========================================================================== callback
def _make_callback_base() -> type:
    from stable_baselines3.common.callbacks import BaseCallback

    class TrainCallback(BaseCallback):
        """Feeds the opponent sampler and logs per-episode play statistics.

        Every env's finished episode → ``sampler.record(info["opponent"],
        info["outcome"])``; reward tiers summed per episode (``reward/<tier>``,
        averaged over the episodes that ended in the rollout); spam fraction
        per episode from the actions actually sent (``play/spam_fraction``).
        """

        def __init__(self, sampler: OpponentSampler, n_envs: int, push_opponents: bool = False,
                     pbar: Any = None) -> None:
            super().__init__(verbose=0)
            self.sampler = sampler
            self.n = n_envs
            self.push = push_opponents
            self.pbar = pbar
            self.tier_sums: list[dict[str, float]] = [{} for _ in range(n_envs)]
            self.counts = np.zeros((n_envs, N_PATTERNS), np.int64)
            self.finished: list[dict[str, Any]] = []

        def _on_step(self) -> bool:
            infos = self.locals["infos"]
            dones = self.locals["dones"]
            acts = self.locals.get("clipped_actions")
            pats = action_patterns(acts if acts is not None else self.locals["actions"])
            for i in range(self.n):
                self.counts[i, pats[i]] += 1
                info = infos[i]
                sums = self.tier_sums[i]
                for k, v in info.items():
                    if k.startswith("reward/"):
                        sums[k] = sums.get(k, 0.0) + float(v)
                if dones[i]:
                    opp, outcome = info.get("opponent"), info.get("outcome")
                    if opp is not None and outcome is not None:
                        self.sampler.record(str(opp), str(outcome))
                    self.finished.append({
                        "tiers": dict(sums), "spam": spam_fraction(self.counts[i]),
                        "outcome": outcome, "opponent": opp,
                    })
                    self.tier_sums[i] = {}
                    self.counts[i] = 0
                    if self.push:
                        self.training_env.env_method(
                            "set_next_opponent", self.sampler.sample(), indices=[i])
            if self.pbar is not None:
                self.pbar.update(self.n)
            return True

        def _on_rollout_end(self) -> None:
            log = self.logger
            for k, v in self.sampler.stats().items():
                log.record(f"curriculum/{k}", v)
            if not self.finished:
                return
            eps = self.finished
            keys = sorted({k for e in eps for k in e["tiers"]})
            for k in keys:
                log.record(k, float(np.mean([e["tiers"].get(k, 0.0) for e in eps])))
            log.record("play/spam_fraction", float(np.mean([e["spam"] for e in eps])))
            log.record("rollout/win_rate", float(np.mean([e["outcome"] == "win" for e in eps])))
            log.record("rollout/episodes", len(eps))
            self.finished = []

    return TrainCallback


# =========================================================================== helpers
def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _gen_paths(run_dir: Path, gen: int) -> tuple[Path, Path]:
    return run_dir / f"gen_{gen:04d}.zip", run_dir / f"gen_{gen:04d}.json"


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(generation, json path) of every finished generation in ``run_dir``, oldest first."""
    out = []
    for p in Path(run_dir).glob("gen_*.json"):
        try:
            gen = int(p.stem.split("_")[1])
        except (IndexError, ValueError):
            continue
        if p.with_suffix(".zip").is_file():
            out.append((gen, p))
    return sorted(out)


def find_resume_dir(role: str, runs_root: str | Path = DEFAULT_RUNS_ROOT) -> Path | None:
    """The run dir of ``role`` holding the newest checkpoint, or None."""
    best: tuple[float, Path] | None = None
    root = Path(runs_root) / role
    if not root.is_dir():
        return None
    for d in root.iterdir():
        ck = list_checkpoints(d) if d.is_dir() else []
        if ck:
            mt = ck[-1][1].stat().st_mtime
            if best is None or mt > best[0]:
                best = (mt, d)
    return best[1] if best else None


def _new_run_dir(role: str, seed: int, runs_root: str | Path) -> Path:
    base = Path(runs_root) / role / f"{time.strftime('%Y%m%d-%H%M%S')}-s{seed}"
    d, i = base, 1
    while d.exists():
        i += 1
        d = base.with_name(f"{base.name}-{i}")
    return d


def _policy_kwargs(log_std_init: float = 0.0) -> dict[str, Any]:
    import torch

    return dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh,
                log_std_init=log_std_init)


def _atomic_write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    tmp.replace(path)


def evaluate_model(model: Any, levels: Sequence[int], episodes: int, envs: Sequence[Any],
                   seed: int = 1_000_000) -> dict[str, dict[str, Any]]:
    """Deterministic policy vs each fixed CPU level, same match seeds every generation."""
    actor = numpy_actor(model.policy)
    return {f"cpu_{lv}": play_episodes(actor, f"cpu:{lv}", episodes, seed + 1000 * lv, envs=envs)
            for lv in levels}


# =========================================================================== train
def train(
    role: str = "main",
    generations: int = 3,
    steps_per_generation: int = 100_000,
    n_envs: int = 2,
    ent_coef: float = DEFAULT_ENT_COEF,
    league_dir: str | None = None,
    registry_url: str | None = None,
    seed: int = 0,
    run_dir: str | Path | None = None,
    progress: bool = True,
    resume: bool = False,
    reward: str = "tiered",
    vec: str = DEFAULT_VEC,
    runs_root: str | Path = DEFAULT_RUNS_ROOT,
    **overrides: Any,
) -> TrainResult:
    """Train ``role`` for ``generations`` × ``steps_per_generation`` env steps.

    ``overrides`` sets any other :class:`TrainConfig` field (``learning_rate``,
    ``n_steps``, ``eval_levels``, ``curriculum_k``, ...).  ``run_dir`` defaults
    to a fresh ``runs/<role>/<timestamp>-s<seed>``; with ``resume=True`` and no
    ``run_dir`` the role's run with the newest checkpoint continues.
    ``league_dir`` / ``registry_url`` are recorded in the metadata only: the
    league's checkpoint opponents and the remote registry are not wired into
    training yet (opponents are the CPU curriculum for every role).
    """
    limit_threads()
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import VecMonitor

    from brawlkit.env import BrawlpitEnv
    from brawlkit.rewards import make_reward, reward_config
    from brawlkit.vecenv import NextOpponent, make_vec_env

    cfg = TrainConfig(role=role, generations=generations, steps_per_generation=steps_per_generation,
                      n_envs=n_envs, ent_coef=ent_coef, league_dir=league_dir,
                      registry_url=registry_url, seed=seed, reward=reward, vec=vec)
    for k, v in overrides.items():
        if not hasattr(cfg, k):
            raise TypeError(f"train() got an unknown option {k!r}")
        setattr(cfg, k, tuple(v) if k == "eval_levels" else v)
    cfg.validate()
    if registry_url:
        print("train: --registry is recorded in the checkpoint metadata only; pushing to / "
              "pulling from the remote registry is not implemented yet", file=sys.stderr)
    make_reward(cfg.reward)  # fail fast on a bad reward name

    # ---- run dir / resume
    resume_from: dict[str, Any] | None = None
    if resume:
        rd = Path(run_dir) if run_dir else find_resume_dir(cfg.role, runs_root)
        if rd is None or not list_checkpoints(rd):
            raise FileNotFoundError(f"--resume: no checkpoint of role {cfg.role!r} under "
                                    f"{run_dir or Path(runs_root) / cfg.role}")
        rdir = rd
        resume_from = json.loads(list_checkpoints(rdir)[-1][1].read_text())
    else:
        rdir = Path(run_dir) if run_dir else _new_run_dir(cfg.role, cfg.seed, runs_root)
        if list_checkpoints(rdir):
            raise FileExistsError(f"{rdir} already holds checkpoints: pass resume=True (--resume) "
                                  "or choose another run_dir")
    rdir.mkdir(parents=True, exist_ok=True)
    start_gen = int(resume_from["generation"]) + 1 if resume_from else 0

    sampler = CpuCurriculum(k=cfg.curriculum_k, floor=cfg.curriculum_floor, seed=cfg.seed + start_gen)
    if resume_from and resume_from.get("sampler"):
        sampler.load_state_dict(resume_from["sampler"])

    # ---- envs
    env_kw: dict[str, Any] = dict(mode="lockstep", action_repeat=cfg.action_repeat)
    # the servers busy-poll between steps only while they leave the trainer a core
    # (auto_spin_us); subproc workers are processes of their own, so never there
    spin = auto_spin_us(cfg.n_envs) if cfg.vec == "inproc" else 0
    train_kw = dict(env_kw, max_episode_steps=cfg.max_episode_steps, server_spin_us=spin)
    n_eval = min(2, cfg.n_envs)
    eval_kw = dict(env_kw, server_spin_us=auto_spin_us(n_eval))

    firsts = [sampler.sample() for _ in range(cfg.n_envs)] if cfg.vec == "subproc" else []

    def env_fn(i: int):
        def make():
            if cfg.vec == "subproc":  # the sampler lives here; picks are pushed to the worker
                return NextOpponent(BrawlpitEnv(opponent=firsts[i], reward=make_reward(cfg.reward),
                                                **train_kw), firsts[i])
            return BrawlpitEnv(opponent="cpu:1", reward=make_reward(cfg.reward),
                               opponent_sampler=sampler, **train_kw)
        return make

    venv = VecMonitor(make_vec_env([env_fn(i) for i in range(cfg.n_envs)], vec=cfg.vec))
    eval_envs: list[Any] = []
    pbar = None
    result = TrainResult(run_dir=rdir)
    t0 = time.perf_counter()
    try:
        eval_envs = [BrawlpitEnv(opponent="cpu:1", **eval_kw) for _ in range(n_eval)]
        # ---- model
        if resume_from:
            zip_path = rdir / f"gen_{int(resume_from['generation']):04d}.zip"
            model = PPO.load(str(zip_path), env=venv, device="cpu")
            model.ent_coef = cfg.ent_coef
            model.set_random_seed(cfg.seed + start_gen)
            parent: str | None = zip_path.name
            # SB3's CSV writer truncates: keep the earlier part under its own name
            old = rdir / "progress.csv"
            if old.is_file():
                old.rename(rdir / f"progress_until_gen_{start_gen - 1:04d}.csv")
        else:
            model = PPO(
                "MlpPolicy", venv, learning_rate=cfg.learning_rate, n_steps=cfg.ppo_n_steps(),
                batch_size=cfg.ppo_batch_size(), n_epochs=cfg.n_epochs, gamma=cfg.gamma,
                gae_lambda=cfg.gae_lambda, clip_range=cfg.clip_range, ent_coef=cfg.ent_coef,
                policy_kwargs=_policy_kwargs(cfg.log_std_init), seed=cfg.seed, device="cpu", verbose=0,
            )
            parent = None
        model.set_logger(configure(str(rdir), ["csv", "tensorboard"]))

        total = cfg.generations * cfg.steps_per_generation
        if progress:
            # tqdm.auto: a widget bar inside Jupyter (one line in a papermill
            # output instead of hundreds of carriage-return updates), text in a terminal
            from tqdm.auto import tqdm

            pbar = tqdm(total=total, desc=f"train {cfg.role}", unit="step", mininterval=2.0,
                        dynamic_ncols=True, file=sys.stderr)
        cb = _make_callback_base()(sampler, cfg.n_envs, push_opponents=cfg.vec == "subproc", pbar=pbar)

        for gen in range(start_gen, start_gen + cfg.generations):
            g0 = time.perf_counter()
            steps_before = model.num_timesteps
            model.learn(total_timesteps=cfg.steps_per_generation, reset_num_timesteps=False,
                        callback=cb, log_interval=1, progress_bar=False)
            train_s = time.perf_counter() - g0
            evals = evaluate_model(model, cfg.eval_levels, cfg.eval_episodes, eval_envs)
            for name, ev in evals.items():
                model.logger.record(f"eval/win_rate/{name}", ev["win_rate"])
                model.logger.record(f"eval/draw_rate/{name}", ev["draw_rate"])
                model.logger.record(f"eval/spam_fraction/{name}", ev["spam_fraction"])
            model.logger.record("eval/generation", gen)
            model.logger.record("time/total_timesteps", model.num_timesteps)
            model.logger.dump(model.num_timesteps)

            zip_path, json_path = _gen_paths(rdir, gen)
            model.save(str(zip_path))
            meta = {
                "role": cfg.role,
                "generation": gen,
                "parent": parent,
                "steps": int(model.num_timesteps),
                "steps_this_generation": int(model.num_timesteps - steps_before),
                "created": _now(),
                "seed": cfg.seed,
                "checkpoint": zip_path.name,
                "eval": {k: {kk: v[kk] for kk in ("episodes", "win_rate", "draw_rate", "loss_rate",
                                                  "mean_stock_diff", "spam_fraction")}
                         for k, v in evals.items()},
                "obs_dim": int(np.prod(venv.observation_space.shape or (0,))),
                "act_dim": int(np.prod(venv.action_space.shape or (0,))),
                "policy": {"net_arch": {"pi": [64, 64], "vf": [64, 64]}, "activation": "tanh"},
                "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(cfg).items()},
                "reward_config": reward_config(make_reward(cfg.reward)),
                "sampler": sampler.state_dict(),
                "league_dir": cfg.league_dir,
                "registry_url": cfg.registry_url,
                "train_seconds": round(train_s, 2),
                "eval_seconds": round(time.perf_counter() - g0 - train_s, 2),
            }
            _atomic_write_json(json_path, meta)
            parent = zip_path.name
            result.checkpoints.append(zip_path)
            result.evals.append({"generation": gen, "steps": meta["steps"],
                                 **{k: v["win_rate"] for k, v in evals.items()}})
            if pbar is not None:
                pbar.set_postfix({k: f"{v['win_rate']:.2f}" for k, v in evals.items()}
                                 | {"lvl": sampler.max_level})
            else:
                print(f"gen {gen}: steps {meta['steps']} "
                      + " ".join(f"{k}={v['win_rate']:.2f}" for k, v in evals.items())
                      + f" max_level={sampler.max_level}", file=sys.stderr, flush=True)
        result.total_timesteps = int(model.num_timesteps)
    finally:
        if pbar is not None:
            pbar.close()
        for e in eval_envs:
            e.close()
        venv.close()
        result.seconds = time.perf_counter() - t0
        try:
            model.logger.close()  # type: ignore[possibly-undefined]
        except Exception:  # noqa: BLE001
            pass
    return result


# =========================================================================== CLI
def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    ap = argparse.ArgumentParser(
        prog="python -m brawlkit train",
        description="Train one league role with SB3 PPO over real UDP packets against the built-in "
        "CPU curriculum; writes runs/<role>/<run>/gen_XXXX.zip + .json, progress CSV and "
        "TensorBoard logs.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--role", choices=ROLES, default="main",
                    help="league role; for now every role trains against the CPU curriculum "
                    "(checkpoint opponents / PFSP come with the league)")
    ap.add_argument("--generations", type=int, default=d.generations)
    ap.add_argument("--steps-per-generation", type=int, default=d.steps_per_generation,
                    help="env steps per generation (each ends with a checkpoint + evaluation)")
    ap.add_argument("--n-envs", type=int, default=d.n_envs, help="parallel envs, one server each")
    ap.add_argument("--ent-coef", type=float, default=d.ent_coef,
                    help="PPO entropy coefficient. Keep it small but positive: with SB3's default "
                    "0.0 nothing in the loss resists the Gaussian action distribution collapsing "
                    "toward zero variance, and once it collapses the gradient that would pull it "
                    "back vanishes with it")
    ap.add_argument("--league-dir", default=None,
                    help="league members dir: recorded in the metadata only for now "
                    "(checkpoint opponents are not wired into training yet)")
    ap.add_argument("--registry", dest="registry_url", default=None, metavar="URL",
                    help="remote checkpoint registry: NOT IMPLEMENTED yet — accepted and recorded "
                    "in the metadata, nothing is pushed or pulled")
    ap.add_argument("--seed", type=int, default=d.seed, help="seeds PPO, envs and the curriculum")
    ap.add_argument("--resume", action="store_true",
                    help="continue the role's run with the newest checkpoint (or --run-dir's)")
    ap.add_argument("--reward", default=d.reward,
                    help="reward preset: tiered | outcome | llm_fighting, optionally with "
                    "overrides, e.g. 'tiered:win=5,idle_per_s=0.05'")
    ap.add_argument("--vec", choices=VEC_KINDS, default=d.vec,
                    help="inproc: all envs in this process, all commands sent before any snapshot "
                    "is read (measured faster); subproc: SB3 SubprocVecEnv")
    ap.add_argument("--run-dir", default=None, help="run directory (default runs/<role>/<time>-s<seed>)")
    ap.add_argument("--runs-root", default=DEFAULT_RUNS_ROOT)
    ap.add_argument("--lr", dest="learning_rate", type=float, default=d.learning_rate)
    ap.add_argument("--n-steps", type=int, default=d.n_steps, help="PPO rollout length per env")
    ap.add_argument("--batch-size", type=int, default=d.batch_size)
    ap.add_argument("--n-epochs", type=int, default=d.n_epochs)
    ap.add_argument("--gamma", type=float, default=d.gamma)
    ap.add_argument("--log-std-init", type=float, default=d.log_std_init,
                    help="initial log std of the Gaussian policy (0 = std 1, SB3's default)")
    ap.add_argument("--action-repeat", type=int, default=d.action_repeat, help="ticks per action")
    ap.add_argument("--curriculum-k", type=int, default=d.curriculum_k,
                    help="level L+1 unlocks after winning >= half of the last K games at level L")
    ap.add_argument("--eval-levels", default=",".join(map(str, d.eval_levels)),
                    help="CPU levels evaluated at each generation's end (comma list)")
    ap.add_argument("--eval-episodes", type=int, default=d.eval_episodes)
    ap.add_argument("--max-episode-steps", type=int, default=None,
                    help="truncate training episodes after N steps (tiny test runs only)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--json", action="store_true", help="print the result as JSON on the last line")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        res = train(
            role=args.role, generations=args.generations,
            steps_per_generation=args.steps_per_generation, n_envs=args.n_envs,
            ent_coef=args.ent_coef, league_dir=args.league_dir, registry_url=args.registry_url,
            seed=args.seed, run_dir=args.run_dir, progress=not args.no_progress,
            resume=args.resume, reward=args.reward, vec=args.vec, runs_root=args.runs_root,
            learning_rate=args.learning_rate, n_steps=args.n_steps, batch_size=args.batch_size,
            n_epochs=args.n_epochs, gamma=args.gamma, action_repeat=args.action_repeat,
            log_std_init=args.log_std_init,
            curriculum_k=args.curriculum_k,
            eval_levels=tuple(int(x) for x in args.eval_levels.split(",") if x.strip()),
            eval_episodes=args.eval_episodes, max_episode_steps=args.max_episode_steps,
        )
    except (FileNotFoundError, FileExistsError, ValueError) as e:
        print(f"train: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(res.to_json()))
    else:
        print(f"run dir {res.run_dir}: {len(res.checkpoints)} generation(s), "
              f"{res.total_timesteps} steps in {res.seconds:.0f}s")
        for ev in res.evals:
            print("  " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                  for k, v in ev.items()))
    return 0

