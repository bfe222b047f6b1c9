"""``RayVecEnv``: a stable-baselines3 ``VecEnv`` whose envs live in Ray actors.

The envs are split into contiguous slices, one per :class:`~brawlkit.distributed.worker.EnvWorker`
actor (a game server with several arenas, on any node).  Ray places, starts, kills and
replaces the actors and carries the rare calls; the steps travel over one direct TCP
connection per worker (:mod:`~brawlkit.distributed.channel`; the worker's address comes
back from its ``info()``, the connection proves itself with a random token the actor
was constructed with), because a Ray actor call costs about as much as a whole local
step.  Each step:

* ``step_async`` writes every worker its slice of the actions (raw float32) — all
  writes before any read, so all workers (and all their servers) step at once;
* ``step_wait`` reads the replies in worker order (= env order), applies SB3's
  conventions (``terminal_observation``, ``TimeLimit.truncated``) and resets the
  finished envs with the next opponent the trainer's sampler picks — in env order,
  like the in-process :class:`~brawlkit.env.vecenv.BrawlpitVecEnv` does, so the
  sampler, its payoff record and the callbacks see the same sequence of calls (the
  resets go over the same connections: requests to all workers first, then replies).

League opponents travel as member ids; :meth:`RayVecEnv.sync_pool` ships the blobs of
members the sampler's pool gained (called between rollouts by
:class:`~brawlkit.training.envs.RayCallback`, and before a member is first sent).

**A lost worker** (its process killed — its connection then ends at once —, its node
gone, an exception inside it, a reply that does not answer the request just sent, or
no answer within ``step_timeout``) is replaced by a fresh actor with the same slice and a
fresh game server and a fresh connection (so a late reply of the old worker can never
be read as the new one's).  Its envs' episodes cannot continue, and their last transition
never arrived; the step returns them as ended by a time limit — ``done``, reward 0,
``TimeLimit.truncated=True``, ``terminal_observation`` = the last observation the
agent saw from them — so SB3's GAE bootstraps from the value of that state instead
of treating the cut as a real end, and the observation returned is the first of a
new episode from the replacement.  ``info["worker_lost"]`` marks them; they carry no
outcome, so no result enters the payoff.  :attr:`RayVecEnv.events` lists every loss.
"""

from __future__ import annotations

import pickle
import secrets
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from brawlkit.distributed.channel import (
    AUTH,
    ERROR,
    RESET_SOME,
    SEQ_MOD,
    STEP,
    Channel,
    ChannelError,
    decode_step,
    tune,
)
from brawlkit.distributed.cluster import RayConnection, require_ray
from brawlkit.distributed.worker import EnvWorker
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import BASELINE_ID


def split_envs(n_envs: int, n_workers: int) -> list[slice]:
    """Contiguous, as-equal-as-possible slices of ``n_envs`` over ``n_workers``."""
    if not 1 <= n_workers <= n_envs:
        raise ValueError(f"ray_workers must be in 1..n_envs ({n_envs}), got {n_workers}: "
                         "every worker plays at least one env")
    base, extra = divmod(n_envs, n_workers)
    out, start = [], 0
    for w in range(n_workers):
        k = base + (1 if w < extra else 0)
        out.append(slice(start, start + k))
        start += k
    return out


def opponent_spec(sampler: Any) -> Any:
    """The sampler's next pick as something a worker can be sent: a league sampler's
    member id (``choose()``), else ``sample()`` (``"cpu:L"``, or a picklable callable)."""
    if sampler is None:
        return None
    choose = getattr(sampler, "choose", None)
    return choose() if callable(choose) else sampler.sample()


class WorkerLost(RuntimeError):
    """Too many workers were lost in one run: something is wrong beyond one crash."""


class RayVecEnv(VecEnv):
    """``n_envs`` envs over ``n_workers`` Ray actors (see the module docstring).

    Args:
        n_envs, n_workers: envs in total and actors they are split over.
        env_kwargs, reward, servers_per_worker, server_spin_us, env_poll_us: what each
            :class:`~brawlkit.distributed.worker.EnvWorker` is built with.
        sampler: the trainer's opponent sampler (``None``: each env's default opponent).
        address: Ray address (``None``/``"local"``: a local instance sized to this machine;
            ignored when Ray is already initialised in this process).
        worker_cpus: CPUs each actor reserves (default: the cluster's CPUs shared by the
            workers, at most 1 — so two 1-CPU nodes get one worker each).
        step_timeout: seconds a worker may take for one step before it counts as lost.
        max_worker_losses: losses tolerated in one run before :class:`WorkerLost`.
    """

    def __init__(self, n_envs: int, n_workers: int = 2, env_kwargs: dict[str, Any] | None = None,
                 reward: str = "tiered", sampler: Any = None, address: str | None = None,
                 worker_cpus: float | None = None, servers_per_worker: int = 1,
                 server_spin_us: int | None = 0, env_poll_us: float | None = 0.0,
                 step_timeout: float = 60.0,
                 startup_timeout: float = 180.0, max_worker_losses: int = 20,
                 verbose: bool = True) -> None:
        self._slices = split_envs(n_envs, n_workers)
        self.ray = require_ray()
        self.connection = RayConnection(address)
        self.sampler = sampler
        self.step_timeout = step_timeout
        self.startup_timeout = startup_timeout
        self.max_worker_losses = max_worker_losses
        self.verbose = verbose
        self._worker_args = dict(env_kwargs=dict(env_kwargs or {}), reward=reward,
                                 servers=servers_per_worker, server_spin_us=server_spin_us,
                                 env_poll_us=env_poll_us)
        cpus = self.connection.cluster_cpus()
        self._cpus = worker_cpus if worker_cpus is not None else min(1.0, max(cpus, 0.01) / n_workers)
        self._actor_cls = self.ray.remote(EnvWorker)
        self.workers: list[Any] = []
        self.worker_info: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self._dead: set[int] = set()
        self._why: dict[int, str] = {}
        self._lost_at: dict[int, float] = {}
        self._pool: list[tuple[dict[str, Any], bytes | None]] = []
        self._pool_ref: Any = None
        self._shipped: set[str] = set()
        self.channels: list[Channel | None] = []
        self._seq = 0
        self._sent: list[bool] = []  # which workers the pending step was sent to
        self._seed_base: int | None = None
        self._closed = False
        try:
            spawned = [self._spawn(w) for w in range(n_workers)]
            self.workers = [a for a, _ in spawned]
            self.worker_info = self._wait_started(self.workers)
            self.channels = [self._connect(info, token)
                             for info, (_, token) in zip(self.worker_info, spawned, strict=True)]
            obs_space, act_space = self.ray.get(self.workers[0].spaces.remote())
        except BaseException:
            self.close()
            raise
        self._obs_shape: tuple[int, ...] = tuple(obs_space.shape)  # type: ignore[arg-type]
        self._obs_size = int(np.prod(self._obs_shape))
        self._last_obs = np.zeros((n_envs, *self._obs_shape), np.float32)
        super().__init__(n_envs, obs_space, act_space)

    # ------------------------------------------------------------ the actors
    def _spawn(self, w: int) -> tuple[Any, bytes]:
        """A new actor for worker ``w``'s slice and the token its step server wants."""
        sl = self._slices[w]
        token = secrets.token_bytes(32)
        opts = dict(num_cpus=self._cpus, max_restarts=0, scheduling_strategy="SPREAD")
        actor = self._actor_cls.options(**opts).remote(  # type: ignore[attr-defined]
            sl.stop - sl.start, worker_index=w, token=token, **self._worker_args)
        return actor, token

    def _connect(self, info: dict[str, Any], token: bytes) -> Channel:
        """The step connection to a started worker, authenticated."""
        host, port = info["address"]
        deadline = time.monotonic() + self.startup_timeout
        sock = socket.create_connection((host, port), timeout=self.startup_timeout)
        ch = Channel(sock)
        try:
            tune(sock)
            ch.send(AUTH, 0, token)
            kind, seq, _ = ch.recv(deadline)
            if kind != AUTH or seq != 0:
                raise ChannelError(f"worker {info['index']} refused the step connection")
        except BaseException:
            ch.close()
            raise
        return ch

    def _lose(self, w: int, why: str) -> None:
        """Worker ``w`` is lost: its connection is closed at once (whatever it still
        sends is never read) and :meth:`_replace` will take over its slice."""
        self._dead.add(w)
        self._why.setdefault(w, why)
        self._lost_at.setdefault(w, time.time())
        ch = self.channels[w] if w < len(self.channels) else None
        if ch is not None:
            ch.close()

    def _request(self, w: int, kind: int, payload: Any) -> None:
        ch = self.channels[w]
        assert ch is not None
        try:
            ch.send(kind, self._seq, payload)
        except OSError as e:
            self._lose(w, f"step connection: {type(e).__name__}: {e}")

    def _reply(self, w: int, kind: int, deadline: float) -> memoryview | None:
        """Worker ``w``'s answer to the request just sent, or ``None`` (then it is lost)."""
        ch = self.channels[w]
        assert ch is not None
        try:
            got, seq, payload = ch.recv(deadline)
        except ChannelError as e:
            self._lose(w, f"step connection: {e}")
            return None
        if got == ERROR:
            self._lose(w, f"error in the worker: {bytes(payload).decode(errors='replace')}")
            return None
        if got != kind or seq != self._seq:
            self._lose(w, f"step connection: reply {got}/#{seq} to request {kind}/#{self._seq}")
            return None
        return payload

    def _wait_started(self, actors: Sequence[Any]) -> list[dict[str, Any]]:
        refs = [a.info.remote() for a in actors]
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=self.startup_timeout)
        if len(ready) < len(refs):
            raise TimeoutError(
                f"{len(refs) - len(ready)} of {len(refs)} Ray env worker(s) did not start within "
                f"{self.startup_timeout:.0f}s; each reserves {self._cpus:g} CPU and the cluster "
                f"has {self.ray.cluster_resources().get('CPU', 0):g}: lower --ray-workers or add "
                "nodes (docs/distributed.md)")
        return list(self.ray.get(refs))

    def _gather(self, refs: Sequence[Any], skip: set[int] | None = None,
                timeout: float | None = None) -> list[Any]:
        """Results in worker order; ``None`` for a worker that is lost (it is then in
        ``self._dead`` with the reason in ``self._why``)."""
        ray = self.ray
        timeout = self.step_timeout if timeout is None else timeout
        live = [i for i, r in enumerate(refs) if r is not None and i not in (skip or set())]
        out: list[Any] = [None] * len(refs)
        try:  # the usual case: one call for all
            vals = ray.get([refs[i] for i in live], timeout=timeout)
            for i, v in zip(live, vals, strict=True):
                out[i] = v
            return out
        except Exception:  # noqa: BLE001 - sorted out ref by ref below
            pass
        deadline = time.monotonic() + timeout
        for i in live:
            try:
                out[i] = ray.get(refs[i], timeout=max(0.1, deadline - time.monotonic()))
            except Exception as e:  # noqa: BLE001 - RayActorError, RayTaskError, GetTimeoutError
                self._lose(i, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return out

    def _replace(self, w: int) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """A fresh actor for worker ``w``'s slice: started, sent the pool, every env reset."""
        reason = self._why.pop(w, "lost")
        losses = len(self.events) + 1
        old = self.worker_info[w] if w < len(self.worker_info) else {}
        if losses > self.max_worker_losses:
            raise WorkerLost(f"{losses} Ray env workers lost in this run (last: worker {w}, "
                             f"{reason}); giving up — see the workers' logs under Ray's "
                             "session directory (docs/distributed.md)")
        lost_at = self._lost_at.pop(w, time.time())
        ch = self.channels[w]
        if ch is not None:
            ch.close()
        try:
            self.ray.kill(self.workers[w], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        actor, token = self._spawn(w)
        info = self._wait_started([actor])[0]
        self.channels[w] = self._connect(info, token)
        if self._pool:
            self.ray.get(actor.add_members.remote(self._pool))
        sl = self._slices[w]
        seeds = [None if self._seed_base is None else self._seed_base + 1_000_003 * losses + i
                 for i in range(sl.start, sl.stop)]
        specs = [opponent_spec(self.sampler) for _ in range(sl.start, sl.stop)]
        self._ship_for(specs)
        obs, infos = self.ray.get(actor.reset.remote(seeds, specs), timeout=self.startup_timeout)
        self.workers[w] = actor
        self.worker_info[w] = info
        self._dead.discard(w)
        event = {"worker": w, "reason": reason, "envs": list(range(sl.start, sl.stop)),
                 "old_pid": old.get("pid"), "old_node": old.get("node_id"),
                 "new_pid": info["pid"], "new_node": info["node_id"], "detected": lost_at,
                 "time": time.time()}
        self.events.append(event)
        if self.verbose:
            print(f"ray: env worker {w} lost ({reason}); replaced by pid {info['pid']} — envs "
                  f"{sl.start}..{sl.stop - 1} end truncated (lost {losses} so far)",
                  file=sys.stderr, flush=True)
        return obs, infos

    @property
    def worker_losses(self) -> int:
        return len(self.events)

    # ------------------------------------------------------------ opponents
    def _ship_for(self, specs: Sequence[Any]) -> None:

        if any(isinstance(s, str) and not s.startswith("cpu:") and s != BASELINE_ID
               and s not in self._shipped for s in specs):
            self.sync_pool()

    def sync_pool(self) -> int:
        """Ship every member of the sampler's pool not yet sent (record + ``.bpw`` bytes),
        one object in Ray's store shared by all workers.  Returns how many were new."""
        members = getattr(self.sampler, "members", None)
        league_dir = getattr(self.sampler, "league_dir", None)
        if not members or league_dir is None:
            return 0
        new = [m for m in members if m.id not in self._shipped]
        if not new:
            return 0
        league = LeagueDir(league_dir, create=False)  # its confined-read rule
        payload = [(m.to_json(), league.read_artifact(m, "blob")) for m in new]
        self._pool.extend(payload)
        ref = self.ray.put(payload)
        self._gather([None if w in self._dead else a.add_members.remote(ref)
                      for w, a in enumerate(self.workers)])
        self._shipped.update(m.id for m in new)
        return len(new)

    # ------------------------------------------------------------ VecEnv API
    def reset(self) -> np.ndarray:  # type: ignore[override]
        if self._seeds and self._seeds[0] is not None:
            self._seed_base = int(self._seeds[0])  # type: ignore[arg-type]
        specs = [opponent_spec(self.sampler) for _ in range(self.num_envs)]
        self._ship_for(specs)
        refs = [a.reset.remote(self._seeds[sl], specs[sl], self._options[sl])
                for a, sl in zip(self.workers, self._slices, strict=True)]
        outs = self._gather(refs, timeout=self.startup_timeout)
        obs = np.empty((self.num_envs, *self.observation_space.shape), np.float32)  # type: ignore[misc]
        for w, (sl, out) in enumerate(zip(self._slices, outs, strict=True)):
            o, infos = out if out is not None and w not in self._dead else self._replace(w)
            obs[sl] = o
            self.reset_infos[sl] = infos
        self._reset_seeds()
        self._reset_options()
        self._last_obs = obs.copy()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        acts = np.ascontiguousarray(actions, np.float32)
        self._seq = (self._seq + 1) % SEQ_MOD
        self._sent = []
        for w, sl in enumerate(self._slices):
            if w not in self._dead:
                self._request(w, STEP, acts[sl])
            self._sent.append(w not in self._dead)

    def step_wait(self) -> VecEnvStepReturn:
        n = self.num_envs
        deadline = time.monotonic() + self.step_timeout
        outs: list[Any] = [None] * len(self._slices)
        for w, sl in enumerate(self._slices):
            if not self._sent[w] or w in self._dead:
                continue
            payload = self._reply(w, STEP, deadline)
            if payload is None:
                continue
            try:
                outs[w] = decode_step(payload, sl.stop - sl.start, self._obs_shape,
                                      self._obs_size)
            except Exception as e:  # noqa: BLE001 - a garbled reply: the worker is not trusted
                self._lose(w, f"step connection: bad step reply ({type(e).__name__}: {e})")
        obs = np.empty((n, *self._obs_shape), np.float32)
        rews = np.zeros(n, np.float32)
        dones = np.zeros(n, bool)
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        lost_in_step = [w for w, out in enumerate(outs) if out is None]
        resets: dict[int, dict[int, Any]] = {}
        for w, (sl, out) in enumerate(zip(self._slices, outs, strict=True)):
            if out is None:
                continue
            o, r, te, tr, inf = out
            obs[sl], rews[sl] = o, r
            done_w = te | tr
            dones[sl] = done_w
            for j in range(sl.stop - sl.start):
                info = inf[j]
                info["TimeLimit.truncated"] = bool(tr[j] and not te[j])
                if done_w[j]:
                    info["terminal_observation"] = o[j]
                    resets.setdefault(w, {})[j] = opponent_spec(self.sampler)
                infos[sl.start + j] = info
        if resets:
            self._reset_finished(resets, obs)
        for w in sorted(self._dead):
            sl = self._slices[w]
            new_obs, new_infos = self._replace(w)
            for j in range(sl.stop - sl.start):
                i = sl.start + j
                if w in lost_in_step:  # the step itself never came back
                    rews[i] = 0.0
                    infos[i] = {"terminal_observation": self._last_obs[i].copy(),
                                "opponent": None, "outcome": None}
                elif not dones[i]:  # the step came back, the reset did not: cut here
                    infos[i]["terminal_observation"] = obs[i].copy()
                    infos[i]["outcome"] = None
                if w in lost_in_step or not dones[i]:
                    infos[i]["TimeLimit.truncated"] = True
                    infos[i]["worker_lost"] = True
                    dones[i] = True
                obs[i] = new_obs[j]
                self.reset_infos[i] = new_infos[j]
        self._last_obs = obs.copy()
        return obs, rews, dones, infos

    def _reset_finished(self, resets: dict[int, dict[int, Any]], obs: np.ndarray) -> None:
        """Reset the finished envs ``{worker: {local index: spec}}`` over the step
        connections — every request out before any reply is read."""
        specs = [s for d in resets.values() for s in d.values()]
        self._ship_for(specs)
        plain = all(s is None or isinstance(s, str) for s in specs)
        self._seq = (self._seq + 1) % SEQ_MOD
        asked = []
        for w, d in resets.items():
            if w in self._dead:
                continue
            # a callable opponent (a sampler's sample()) needs cloudpickle, as Ray used
            blob = (pickle.dumps(d, protocol=pickle.HIGHEST_PROTOCOL) if plain
                    else self.ray.cloudpickle.dumps(d))
            self._request(w, RESET_SOME, blob)
            asked.append(w)
        deadline = time.monotonic() + self.step_timeout
        for w in asked:
            if w in self._dead:
                continue
            payload = self._reply(w, RESET_SOME, deadline)
            if payload is None:  # lost between its step and the reset: step_wait cuts the rest
                continue
            try:
                back = pickle.loads(payload)
            except Exception as e:  # noqa: BLE001
                self._lose(w, f"step connection: bad reset reply ({type(e).__name__}: {e})")
                continue
            start = self._slices[w].start
            for j, (o, info) in back.items():
                obs[start + j] = o
                self.reset_infos[start + j] = info

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        for ch in self.channels:
            if ch is not None:
                ch.close()
        if self.workers:
            refs = [a.close.remote() for a in self.workers]
            try:
                ray.wait(refs, num_returns=len(refs), timeout=30)
            except Exception:  # noqa: BLE001 - closing anyway
                pass
            for a in self.workers:
                try:
                    ray.kill(a, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
        self.connection.close()

    # ------------------------------------------------------------ per-env calls
    def _by_worker(self, indices: VecEnvIndices) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for i in self._get_indices(indices):
            w = next(k for k, sl in enumerate(self._slices) if sl.start <= i < sl.stop)
            out.setdefault(w, []).append(i - self._slices[w].start)
        return out

    def _per_env(self, method: str, indices: VecEnvIndices, *args: Any) -> list[Any]:
        groups = self._by_worker(indices)
        refs = {w: getattr(self.workers[w], method).remote(*args, local) for w, local in groups.items()}
        vals = self.ray.get(list(refs.values()), timeout=self.step_timeout)
        out: list[Any] = []
        for v in vals:  # workers in order, indices within each in order
            out.extend(v or [])
        return out

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        return self._per_env("env_method", indices, method_name, method_args, method_kwargs)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._per_env("get_attr", indices, attr_name)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._per_env("set_attr", indices, attr_name, value)

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        return self._per_env("env_is_wrapped", indices, wrapper_class)

    def node_ids(self) -> list[str | None]:
        """The Ray node each worker runs on (as it started)."""
        return [i.get("node_id") for i in self.worker_info]
