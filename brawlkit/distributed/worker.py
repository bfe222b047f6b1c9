"""One env worker: a game server with several arenas and the envs that play on them.

:class:`EnvWorker` is plain Python (no Ray import): :class:`~brawlkit.distributed.vecenv.RayVecEnv`
runs it as a Ray actor, one process per worker, anywhere on the cluster; the tests
can also drive it directly.  Inside, it is the local training path unchanged — a
:class:`~brawlkit.wire.server.ServerGroup`, N :class:`~brawlkit.env.BrawlpitEnv`
arenas and :class:`~brawlkit.env.vecenv.BrawlpitVecEnv`'s send-all-then-read-all step —
with two differences that keep the trainer in charge:

* **no auto-reset.**  A finished env waits; the trainer samples its next opponent
  (the sampler and its payoff record live in the trainer only) and calls
  :meth:`EnvWorker.reset_some`.  So the opponent of the next episode is chosen after
  the last result is known, exactly as the in-process path does (no episode of lag).
* **opponents by name.**  The trainer sends ``"cpu:L"`` or a league member id; the
  worker turns ids into frozen numpy opponents from the ``.bpw`` blobs the trainer
  shipped (:meth:`add_members`, between rollouts) into a private directory, so a
  worker on another machine needs no copy of the league directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.env.vecenv import BrawlpitVecEnv

Result = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]


class WorkerVecEnv(BrawlpitVecEnv):
    """:class:`BrawlpitVecEnv` without auto-reset: :meth:`step_raw` returns each env's
    own ``(obs, reward, terminated, truncated, info)`` and finished envs stay finished
    until :meth:`reset_one_with` (the trainer decides what comes next)."""

    def step_raw(self, actions: np.ndarray) -> Result:
        envs = self.envs
        results: list[Any] = [None] * self.num_envs
        for i, env in enumerate(envs):  # every command out before any snapshot is read
            if self._split[i]:
                env.step_send(actions[i])  # type: ignore[attr-defined]
            else:
                results[i] = env.step(actions[i])
        for i, env in enumerate(envs):
            if self._split[i]:
                results[i] = env.step_recv()  # type: ignore[attr-defined]
        obs = np.stack([r[0] for r in results]).astype(np.float32, copy=False)
        rews = np.array([r[1] for r in results], np.float32)
        terms = np.array([bool(r[2]) for r in results], bool)
        truncs = np.array([bool(r[3]) for r in results], bool)
        return obs, rews, terms, truncs, [r[4] for r in results]

    def reset_one_with(self, i: int, seed: int | None, options: dict[str, Any] | None
                       ) -> tuple[np.ndarray, dict[str, Any]]:
        return self.envs[i].reset(seed=seed, options=options or None)


def _remove_dead_workers_dirs() -> None:
    """A killed worker cannot remove its private pool directory: the next worker on the
    machine removes those whose process (the ``pid`` in the name) is gone."""
    for d in Path(tempfile.gettempdir()).glob("bk_worker*-pid*-*"):
        try:
            pid = int(d.name.split("-pid", 1)[1].split("-", 1)[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, IndexError, PermissionError):
            continue


class EnvWorker:
    """``n_envs`` BRAWLPIT envs on ``servers`` game server(s) of this process's machine.

    Args:
        n_envs: envs (arenas) of this worker.
        env_kwargs: :class:`~brawlkit.env.BrawlpitEnv` keyword arguments every env gets
            (mode, action_repeat, input_layout, max_episode_steps, opponent, ...);
            plain data, since they travel to another process.
        reward: reward spec (``"tiered"``, ``"tiered:win=5"``; docs/rewards.md): each env
            builds its own reward object (rewards keep per-episode state).
        servers: game server processes (0 = one per core the worker leaves free,
            :class:`~brawlkit.wire.server.ServerGroup`'s rule).
        server_spin_us: the servers' busy-poll window; default 0 (block): a worker
            shares its machine with other workers and Ray's own processes, and a
            spinning server would take a core they need (measured in docs/distributed.md).
        worker_index: its position in the trainer's worker list (logs, errors).
    """

    def __init__(self, n_envs: int, env_kwargs: dict[str, Any] | None = None,
                 reward: str = "tiered", servers: int = 1, server_spin_us: int | None = 0,
                 worker_index: int = 0) -> None:
        from brawlkit.common.threads import limit_threads

        limit_threads()
        from brawlkit.env import BrawlpitEnv
        from brawlkit.env.rewards import make_reward
        from brawlkit.league.roles import LeagueSampler
        from brawlkit.wire.server import ServerGroup

        kw = {"mode": "lockstep", **(env_kwargs or {})}
        self.index = worker_index
        self.n_envs = n_envs
        _remove_dead_workers_dirs()
        self._pool_dir = Path(tempfile.mkdtemp(prefix=f"bk_worker{worker_index}-pid{os.getpid()}-"))
        # turns member ids into opponents (FrozenOpponent from the shipped blobs,
        # the scripted baseline, "cpu:L"): the league's own code, fed another directory
        self._resolver = LeagueSampler(self._pool_dir, int(kw.get("input_layout", 2)),
                                       int(kw.get("action_repeat", 4)))
        spin: dict[str, Any] = {} if server_spin_us is None else {"spin_us": server_spin_us}
        self.group = ServerGroup(n_envs, servers=servers, **spin)
        try:
            fns = [self._env_fn(BrawlpitEnv, make_reward, reward, kw, i) for i in range(n_envs)]
            self.venv = WorkerVecEnv(fns)
        except BaseException:
            self.group.close()
            raise

    def _env_fn(self, cls: Any, make_reward: Any, reward: str, kw: dict[str, Any], i: int) -> Any:
        server = self.group.server_for(i)
        return lambda: cls(reward=make_reward(reward), server=server, **kw)

    # ----------------------------------------------------------------- identity
    def info(self) -> dict[str, Any]:
        """Where this worker runs: Ray node id (when under Ray), host, pid, server pids."""
        node = None
        try:
            import ray

            if ray.is_initialized():
                node = ray.get_runtime_context().get_node_id()
        except ImportError:  # driven directly, without Ray
            pass
        return {"index": self.index, "node_id": node, "host": socket.gethostname(),
                "pid": os.getpid(), "server_pids": [s.pid for s in self.group.servers],
                "n_envs": self.n_envs}

    def spaces(self) -> tuple[Any, Any]:
        return self.venv.observation_space, self.venv.action_space

    # ----------------------------------------------------------------- opponents
    def add_members(self, members: list[tuple[dict[str, Any], bytes | None]]) -> int:
        """Take in league members (record, ``.bpw`` bytes) the trainer's pool gained:
        the blob is written where the record says, relative to this worker's private
        pool directory, so :class:`~brawlkit.league.opponents.FrozenOpponent` loads it
        as it would from the league directory.  Returns the pool size."""
        from brawlkit.league.records import Member

        have = {m.id: m for m in self._resolver.members}
        for data, blob in members:
            m = Member.from_json(data)
            if m.blob is not None and blob is not None:
                path = self._pool_dir / m.blob
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(blob)
            have[m.id] = m
        self._resolver.refresh(list(have.values()))
        return len(self._resolver.members)

    def _opponent(self, spec: Any) -> Any:
        if isinstance(spec, str) and not spec.startswith("cpu:"):
            try:
                return self._resolver.opponent(spec)
            except StopIteration:
                raise ValueError(f"worker {self.index}: opponent {spec!r} is not a member this "
                                 "worker was sent (RayVecEnv.sync_pool ships the pool's blobs "
                                 "before they are sampled)") from None
        return spec

    def _options(self, spec: Any, options: dict[str, Any] | None) -> dict[str, Any] | None:
        opts = dict(options or {})
        if spec is not None:
            opts["opponent"] = self._opponent(spec)
        return opts or None

    # ----------------------------------------------------------------- stepping
    def reset(self, seeds: list[int | None], specs: list[Any],
              options: list[dict[str, Any] | None] | None = None
              ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """Reset every env (its seed, its next opponent spec or None for its default)."""
        options = options or [None] * self.n_envs
        obs, infos = [], []
        for i in range(self.n_envs):
            o, info = self.venv.reset_one_with(i, seeds[i], self._options(specs[i], options[i]))
            obs.append(o)
            infos.append(info)
        return np.stack(obs).astype(np.float32, copy=False), infos

    def step(self, actions: np.ndarray) -> Result:
        """One step of every env; finished envs are not reset (see the module docstring)."""
        return self.venv.step_raw(actions)

    def reset_some(self, specs: dict[int, Any]) -> dict[int, tuple[np.ndarray, dict[str, Any]]]:
        """Reset the finished envs ``{local index: next opponent spec or None}``."""
        return {i: self.venv.reset_one_with(i, None, self._options(spec, None))
                for i, spec in sorted(specs.items())}

    # ----------------------------------------------------------------- SB3 plumbing
    def env_method(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                   indices: list[int]) -> list[Any]:
        return self.venv.env_method(name, *args, indices=indices, **kwargs)

    def get_attr(self, name: str, indices: list[int]) -> list[Any]:
        return self.venv.get_attr(name, indices)

    def set_attr(self, name: str, value: Any, indices: list[int]) -> None:
        self.venv.set_attr(name, value, indices)

    def env_is_wrapped(self, wrapper_class: type, indices: list[int]) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices)

    def close(self) -> None:
        """Close the envs and the servers, remove the private pool directory."""
        try:
            self.venv.close()
        finally:
            self.group.close()
            shutil.rmtree(self._pool_dir, ignore_errors=True)
