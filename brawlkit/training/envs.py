"""The envs of a training run, built in one place and closed together.

A run needs a training vec env (``cfg.n_envs`` envs whose opponents come from the
run's sampler), the evaluation envs (the deterministic policy against fixed CPU
levels at each generation's end, every match at once) and the game servers they play on.  How the
training envs run is ``cfg.vec`` / ``cfg.ray``:

* ``inproc`` (default): every env an arena of one :class:`ServerGroup` (a server
  process per core the trainer leaves free), stepped together by
  :class:`~brawlkit.env.vecenv.BrawlpitVecEnv` (through its fast lane); the
  evaluation envs are arenas of the same group;
* ``subproc``: SB3's ``SubprocVecEnv``, each worker with a server of its own that
  never spins; the sampler stays here and pushes each worker its next opponent one
  episode late (:class:`~brawlkit.env.vecenv.NextOpponent`); the evaluation envs
  get servers of their own;
* ``ray``: the envs in Ray actors (:class:`~brawlkit.distributed.ray_vecenv.RayVecEnv`,
  docs/distributed.md); the evaluation envs are arenas of a local one-process group,
  and :class:`RayCallback` ships new league members to the workers between rollouts.

Every path takes its env settings from :func:`env_kwargs`, so an env trained
locally, in subprocesses or in Ray plays by the same rules.
"""

from __future__ import annotations

import contextlib
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.vec_env import VecMonitor

from brawlkit.common.io import Closing
from brawlkit.distributed.ray_vecenv import RayVecEnv
from brawlkit.env import BrawlpitEnv
from brawlkit.env.rewards import make_reward
from brawlkit.env.vecenv import NextOpponent, make_vec_env
from brawlkit.training.config import TrainConfig
from brawlkit.training.evaluate import EVAL_ARENAS
from brawlkit.wire.cpu_level import CpuLevel
from brawlkit.wire.server_process import ServerGroup

#: the opponent an env is built with before its sampler (or an evaluation) picks one
_FIRST_OPPONENT = CpuLevel(1).spec


def env_kwargs(cfg: TrainConfig, *, training: bool = True) -> dict[str, Any]:
    """The :class:`~brawlkit.env.BrawlpitEnv` settings of ``cfg``: the one declaration the
    local, subprocess and Ray paths share.  Evaluation envs (``training=False``) play
    whole matches, never truncated."""
    kw: dict[str, Any] = {"mode": "lockstep", "action_repeat": cfg.action_repeat,
                          "input_layout": cfg.input_layout}
    if training:
        kw["max_episode_steps"] = cfg.max_episode_steps
    return kw


class RayCallback(BaseCallback):
    """Between rollouts: new league members' blobs to every worker; logs the workers."""

    def __init__(self, venv: RayVecEnv) -> None:
        super().__init__(verbose=0)
        self.venv = venv

    def _on_rollout_start(self) -> None:
        self.venv.sync_pool()

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.logger.record("ray/workers", len(self.venv.workers))
        self.logger.record("ray/worker_losses", self.venv.worker_losses)


class TrainingEnvs(Closing):
    """``venv`` (the training vec env, under ``VecMonitor``), ``evals`` (the evaluation
    envs) and the servers they play on, built for ``cfg`` and closed by :meth:`close`
    (or ``with``) in reverse order; a failure half-way closes what was built."""

    def __init__(self, cfg: TrainConfig, sampler: Any) -> None:
        self._stack = contextlib.ExitStack()
        self.ray_venv: RayVecEnv | None = None
        try:
            self.group = self._servers(cfg)
            self.venv = self._training_envs(cfg, sampler)
            self.evals = self._eval_envs(cfg)
        except BaseException:
            self.close()
            raise

    def _servers(self, cfg: TrainConfig) -> ServerGroup:
        """The local server group: every env's arena (inproc), or the evaluation envs'
        alone (subproc and ray: each training env or worker has a server of its own)."""
        if cfg.vec == "inproc" and cfg.ray is None:  # the evaluation envs' arenas too
            group = ServerGroup(cfg.n_envs + EVAL_ARENAS, servers=cfg.servers)
        else:  # the training envs have servers of their own: one for the evaluation
            group = ServerGroup(EVAL_ARENAS, servers=1)
        self._stack.callback(group.close)
        return group

    def _training_envs(self, cfg: TrainConfig, sampler: Any) -> Any:
        kw = env_kwargs(cfg)
        if cfg.ray is not None:
            self.ray_venv = RayVecEnv(cfg.n_envs, cfg.ray_workers,
                                      env_kwargs={**kw, "opponent": _FIRST_OPPONENT},
                                      reward=cfg.reward, sampler=sampler, address=cfg.ray,
                                      servers_per_worker=max(1, cfg.servers))
            self._stack.callback(self.ray_venv.close)
            return VecMonitor(self.ray_venv)
        if cfg.vec != "inproc":  # subproc: the sampler lives here; picks are pushed, one late
            firsts = [sampler.sample() for _ in range(cfg.n_envs)]

            def env_fn(i: int) -> Any:
                return lambda: NextOpponent(BrawlpitEnv(
                    opponent=firsts[i], reward=make_reward(cfg.reward), server_spin_us=0,
                    **kw), firsts[i])
        else:
            group = self.group

            def env_fn(i: int) -> Any:
                return lambda: BrawlpitEnv(
                    opponent=_FIRST_OPPONENT, opponent_sampler=sampler,
                    reward=make_reward(cfg.reward), server=group.server_for(i), **kw)
        venv = VecMonitor(make_vec_env([env_fn(i) for i in range(cfg.n_envs)], vec=cfg.vec))
        self._stack.callback(venv.close)
        return venv

    def _eval_envs(self, cfg: TrainConfig) -> list[BrawlpitEnv]:
        """:data:`EVAL_ARENAS` evaluation envs: every level's matches of a generation's
        evaluation play at once (training/evaluate.py ``play_matches``)."""
        kw = env_kwargs(cfg, training=False)
        evals: list[BrawlpitEnv] = []

        def close_evals() -> None:
            for e in evals:
                e.close()
        self._stack.callback(close_evals)
        group = self.group
        first = cfg.n_envs if cfg.ray is None and cfg.vec == "inproc" else 0
        for i in range(EVAL_ARENAS):
            evals.append(BrawlpitEnv(opponent=_FIRST_OPPONENT, server=group.server_for(first + i),
                                     **kw))
        return evals

    def lane_stats(self) -> dict[str, int]:
        """The training vec env's fast-lane counters so far (docs/benchmarks.md): vector
        steps, batched ones, env steps handed back to Python (``fallbacks``: a defect),
        commands re-sent, and the BATCH datagrams sent and SNAPSHOTs taken from
        BATCH_SNAPs (docs/protocol.md "Batches"); zeros when the envs are not stepped by
        a lane."""
        lane = getattr(getattr(self.venv, "venv", self.venv), "lane", None)
        keys = ("steps", "batched_steps", "fallbacks", "resends")
        out = {k: int(getattr(lane, k, 0)) for k in keys}
        batch = getattr(lane, "batch", None)
        out["batch_datagrams"] = int(getattr(batch, "sent", 0))
        out["batch_items"] = int(getattr(batch, "items", 0))
        return out

    def callback(self, base: BaseCallback) -> BaseCallback:
        """``base``, plus the Ray workers' pool sync and logging when the envs are Ray's."""
        if self.ray_venv is None:
            return base
        return CallbackList([base, RayCallback(self.ray_venv)])

    def close(self) -> None:
        self._stack.close()
