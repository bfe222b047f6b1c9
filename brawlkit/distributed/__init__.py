"""Env workers on a Ray cluster (``train --ray``; docs/distributed.md).

* :mod:`~brawlkit.distributed.worker` — :class:`EnvWorker`: a game server with several
  arenas and their envs, run as a Ray actor (plain Python: no Ray import);
* :mod:`~brawlkit.distributed.ray_vecenv` — :class:`RayVecEnv`, the SB3 ``VecEnv`` over the
  workers, with lost-worker replacement;
* :mod:`~brawlkit.distributed.channel` — the per-step data path: one authenticated TCP
  connection per worker, a tiny framed protocol (Ray carries only the rare calls);
* :mod:`~brawlkit.distributed.cluster` — connecting: a local instance sized to this
  machine, or a running cluster.

What ``train --ray`` plugs into the PPO loop (the Ray vec env and its callback) lives
with the other training envs, in :mod:`brawlkit.training.envs`.

Ray is an optional extra (``make ray`` / ``pip install -e .[ray]``) and only this
package imports it, on demand: importing ``brawlkit.distributed`` itself does not.
"""

from __future__ import annotations

from typing import Any

__all__ = ["EnvWorker", "RayVecEnv"]


def __getattr__(name: str) -> Any:
    if name == "EnvWorker":
        from brawlkit.distributed.worker import EnvWorker

        return EnvWorker
    if name == "RayVecEnv":
        from brawlkit.distributed.ray_vecenv import RayVecEnv

        return RayVecEnv
    raise AttributeError(name)
