"""One env worker: a game server with several arenas and the envs that play on them.

:class:`EnvWorker` is plain Python (no Ray import): :class:`~brawlkit.distributed.ray_vecenv.RayVecEnv`
runs it as a Ray actor, one process per worker, anywhere on the cluster; the tests
can also drive it directly.  Inside, it is the local training path unchanged — a
:class:`~brawlkit.wire.server_process.ServerGroup`, N :class:`~brawlkit.env.BrawlpitEnv`
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

The steps do not go through Ray: given a ``token``, the worker listens on a TCP port of
its node (Ray's node address, so a trainer on another machine reaches it) and a
background thread serves the trainer's step and reset requests over the one
authenticated connection (:mod:`~brawlkit.distributed.channel`: a Ray actor call costs
~0.7 ms, as much as a whole local step of 16 envs).  Ray keeps placing, starting,
killing and watching the worker, and carries its rare calls; a lock keeps those and
the socket's requests from touching the envs at the same time.
"""

from __future__ import annotations

import hmac
import os
import pickle
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.threads import limit_threads
from brawlkit.distributed.channel import (
    AUTH,
    ERROR,
    MAX_AUTH_BYTES,
    RESET_SOME,
    STEP,
    Channel,
    ChannelError,
    encode_step,
    tune,
)
from brawlkit.env import BrawlpitEnv
from brawlkit.env.rewards import make_reward
from brawlkit.env.vecenv import BrawlpitVecEnv
from brawlkit.league.records import Member
from brawlkit.league.roles import LeagueSampler
from brawlkit.wire.server_process import ServerGroup

#: seconds a new connection has to present the token before the worker hangs up
AUTH_TIMEOUT = 10.0

Result = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]


class WorkerVecEnv(BrawlpitVecEnv):
    """:class:`BrawlpitVecEnv` without auto-reset: :meth:`step_raw` returns each env's
    own ``(obs, reward, terminated, truncated, info)`` and finished envs stay finished
    until :meth:`reset_one_with` (the trainer decides what comes next)."""

    def step_raw(self, actions: np.ndarray) -> Result:
        """One step of every env through :meth:`BrawlpitVecEnv.step_all` (the fast lane:
        one C call for every command and snapshot, as in the trainer's local vec env —
        the per-env Python path costs a worker ~2x the time per env-step)."""
        results = self.step_all(actions)
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


def _node_ip() -> str:
    """Ray's address of this node (what other nodes reach it by), else loopback."""
    try:
        import ray

        if ray.is_initialized():
            return str(ray.util.get_node_ip_address())
    except ImportError:  # driven directly, without Ray
        pass
    return "127.0.0.1"


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
            :class:`~brawlkit.wire.server_process.ServerGroup`'s rule).
        server_spin_us: the servers' busy-poll window; default 0 (block): a worker
            shares its machine with other workers and Ray's own processes, and a
            spinning server would take a core they need (measured in docs/distributed.md).
        env_poll_us: how long the envs busy-poll for their server's answer before they
            block (``BrawlpitEnv(poll_us=...)``; an explicit ``poll_us`` in ``env_kwargs``
            wins).  Default 0, for the same reason: on a 2-core box the 200 µs default
            spin of two workers keeps the two servers they wait for off the cores
            (measured in docs/distributed.md).
        worker_index: its position in the trainer's worker list (logs, errors).
        token: the secret a step connection must present first (``None``: no step
            server; the worker is only driven by method calls, as in direct use).
        host: address to listen on (default: Ray's address of this node when under
            Ray, else loopback); the port is the system's choice, see :meth:`info`.
    """

    def __init__(self, n_envs: int, env_kwargs: dict[str, Any] | None = None,
                 reward: str = "tiered", servers: int = 1, server_spin_us: int | None = 0,
                 env_poll_us: float | None = 0.0, worker_index: int = 0, token: bytes | None = None,
                 host: str | None = None) -> None:

        limit_threads()

        kw = {"mode": "lockstep", **(env_kwargs or {})}
        if env_poll_us is not None:
            kw.setdefault("poll_us", env_poll_us)
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
        self._lock = threading.RLock()
        self._closing = False
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.address: tuple[str, int] | None = None
        if token is not None:
            self._token = bytes(token)
            self._listen(host or _node_ip())

    # ----------------------------------------------------------------- step server
    def _listen(self, host: str) -> None:
        lst = socket.create_server((host, 0), backlog=8)
        self._listener = lst
        self.address = (host, int(lst.getsockname()[1]))
        threading.Thread(target=self._accept_loop, name="bk-step-accept", daemon=True).start()

    def _accept_loop(self) -> None:
        lst = self._listener
        assert lst is not None
        while not self._closing:
            try:
                conn, _ = lst.accept()
            except OSError:  # the listener was closed: the worker is closing
                return
            # each connection gets its own thread, so a stranger that connects and says
            # nothing cannot hold up the trainer's connection
            threading.Thread(target=self._serve, args=(conn,), name="bk-step-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        """Authenticate, then answer requests until the trainer hangs up."""
        ch = Channel(conn)
        try:
            tune(conn)
            conn.settimeout(AUTH_TIMEOUT)
            kind, seq, payload = ch.recv(max_len=MAX_AUTH_BYTES)
            if kind != AUTH or not hmac.compare_digest(bytes(payload), self._token):
                return  # hang up: nothing from an unauthenticated peer is ever unpickled
            conn.settimeout(None)
            self._conns.append(conn)
            ch.send(AUTH, seq)
            while not self._closing:
                kind, seq, payload = ch.recv()
                try:
                    with self._lock:
                        if kind == STEP:
                            k = self.n_envs
                            acts = np.frombuffer(payload, np.float32).reshape(k, -1)
                            parts = encode_step(*self.step(acts))
                        elif kind == RESET_SOME:
                            specs = pickle.loads(payload)
                            parts = [pickle.dumps(self.reset_some(specs),
                                                  protocol=pickle.HIGHEST_PROTOCOL)]
                        else:
                            raise ValueError(f"unknown request kind {kind}")
                except Exception as e:  # noqa: BLE001 - the trainer decides (lost worker)
                    first = str(e).splitlines()[0] if str(e) else ""
                    ch.send(ERROR, seq, f"{type(e).__name__}: {first}".encode())
                    continue
                ch.send(kind, seq, *parts)
        except (ChannelError, OSError):
            pass  # the trainer closed the connection (or vanished): nothing to answer
        finally:
            if conn in self._conns:
                self._conns.remove(conn)
            ch.close()

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
                "n_envs": self.n_envs,
                "address": list(self.address) if self.address is not None else None}

    def spaces(self) -> tuple[Any, Any]:
        return self.venv.observation_space, self.venv.action_space

    # ----------------------------------------------------------------- opponents
    def add_members(self, members: list[tuple[dict[str, Any], bytes | None]]) -> int:
        """Take in league members (record, ``.bpw`` bytes) the trainer's pool gained:
        the blob is written where the record says, relative to this worker's private
        pool directory, so :class:`~brawlkit.league.opponents.FrozenOpponent` loads it
        as it would from the league directory.  Returns the pool size."""

        with self._lock:
            return self._add_members(members, Member)

    def _add_members(self, members: list[tuple[dict[str, Any], bytes | None]],
                     Member: Any) -> int:  # noqa: N803 - the class, imported on demand
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
        with self._lock:
            for i in range(self.n_envs):
                o, info = self.venv.reset_one_with(i, seeds[i],
                                                   self._options(specs[i], options[i]))
                obs.append(o)
                infos.append(info)
        return np.stack(obs).astype(np.float32, copy=False), infos

    def step(self, actions: np.ndarray) -> Result:
        """One step of every env; finished envs are not reset (see the module docstring)."""
        with self._lock:
            return self.venv.step_raw(actions)

    def reset_some(self, specs: dict[int, Any]) -> dict[int, tuple[np.ndarray, dict[str, Any]]]:
        """Reset the finished envs ``{local index: next opponent spec or None}``."""
        with self._lock:
            return {i: self.venv.reset_one_with(i, None, self._options(spec, None))
                    for i, spec in sorted(specs.items())}

    # ----------------------------------------------------------------- SB3 plumbing
    def env_method(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                   indices: list[int]) -> list[Any]:
        with self._lock:
            return self.venv.env_method(name, *args, indices=indices, **kwargs)

    def get_attr(self, name: str, indices: list[int]) -> list[Any]:
        with self._lock:
            return self.venv.get_attr(name, indices)

    def set_attr(self, name: str, value: Any, indices: list[int]) -> None:
        with self._lock:
            self.venv.set_attr(name, value, indices)

    def env_is_wrapped(self, wrapper_class: type, indices: list[int]) -> list[bool]:
        return self.venv.env_is_wrapped(wrapper_class, indices)

    def close(self) -> None:
        """Stop the step server, close the envs and the servers, remove the private pool
        directory."""
        self._closing = True
        if self._listener is not None:
            self._listener.close()
        for conn in list(self._conns):  # wakes a serving thread blocked in recv
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            with self._lock:
                self.venv.close()
        finally:
            self.group.close()
            shutil.rmtree(self._pool_dir, ignore_errors=True)
