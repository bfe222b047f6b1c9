"""The ``--ray`` training path: envs in Ray actors, everything else as in the local run.

:func:`make_ray_envs` is what :func:`brawlkit.training.ppo.train` calls instead of its
in-process vec env when ``cfg.ray`` is set: the training envs become a
:class:`~brawlkit.distributed.vecenv.RayVecEnv` over ``cfg.ray_workers`` actors, the two
evaluation envs stay in the trainer's machine (arenas of a local server: evaluation
runs the exporter's numpy forward here, between generations).  The opponent sampler,
the payoff record, the league directory, the registry sync and the checkpoints all
stay in the trainer; :class:`RayCallback` ships pool changes to the workers at each
rollout start and logs worker losses (``ray/worker_losses``).
"""

from __future__ import annotations

from typing import Any

from stable_baselines3.common.callbacks import BaseCallback

from brawlkit.distributed.vecenv import RayVecEnv


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


def make_ray_envs(cfg: Any, sampler: Any) -> tuple[Any, RayVecEnv]:
    """(``VecMonitor(RayVecEnv)`` of ``cfg``'s training envs, the RayVecEnv itself)."""
    from stable_baselines3.common.vec_env import VecMonitor

    env_kwargs = {"mode": "lockstep", "action_repeat": cfg.action_repeat,
                  "input_layout": cfg.input_layout, "max_episode_steps": cfg.max_episode_steps,
                  "opponent": "cpu:1"}
    ray_venv = RayVecEnv(cfg.n_envs, cfg.ray_workers, env_kwargs=env_kwargs, reward=cfg.reward,
                         sampler=sampler, address=cfg.ray,
                         servers_per_worker=max(1, cfg.servers))
    try:
        return VecMonitor(ray_venv), ray_venv
    except BaseException:
        ray_venv.close()
        raise
