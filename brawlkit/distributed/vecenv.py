"""``RayVecEnv``: a stable-baselines3 ``VecEnv`` whose envs live in Ray actors.

The envs are split into contiguous slices, one per :class:`~brawlkit.distributed.worker.EnvWorker`
actor (a game server with several arenas, on any node).  Each step:

* ``step_async`` sends every worker its slice of the actions — one non-blocking remote
  call per worker, so all workers (and all their servers) step at once;
* ``step_wait`` gathers the results in worker order (= env order), applies SB3's
  conventions (``terminal_observation``, ``TimeLimit.truncated``) and resets the
  finished envs with the next opponent the trainer's sampler picks — in env order,
  like the in-process :class:`~brawlkit.env.vecenv.BrawlpitVecEnv` does, so the
  sampler, its payoff record and the callbacks see the same sequence of calls.

League opponents travel as member ids; :meth:`RayVecEnv.sync_pool` ships the blobs of
members the sampler's pool gained (called between rollouts by
:class:`~brawlkit.distributed.training.RayCallback`, and before a member is first sent).

**A lost worker** (its process killed, its node gone, an exception inside it, or no
answer within ``step_timeout``) is replaced by a fresh actor with the same slice and a
fresh game server.  Its envs' episodes cannot continue, and their last transition
never arrived; the step returns them as ended by a time limit — ``done``, reward 0,
``TimeLimit.truncated=True``, ``terminal_observation`` = the last observation the
agent saw from them — so SB3's GAE bootstraps from the value of that state instead
of treating the cut as a real end, and the observation returned is the first of a
new episode from the replacement.  ``info["worker_lost"]`` marks them; they carry no
outcome, so no result enters the payoff.  :attr:`RayVecEnv.events` lists every loss.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn

from brawlkit.distributed.cluster import RayConnection, require_ray
from brawlkit.distributed.worker import EnvWorker


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
        env_kwargs, reward, servers_per_worker, server_spin_us: what each
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
                 server_spin_us: int | None = 0, step_timeout: float = 60.0,
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
                                 servers=servers_per_worker, server_spin_us=server_spin_us)
        cpus = self.connection.cluster_cpus()
        self._cpus = worker_cpus if worker_cpus is not None else min(1.0, max(cpus, 0.01) / n_workers)
        self._actor_cls = self.ray.remote(EnvWorker)
        self.workers: list[Any] = []
        self.worker_info: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self._dead: set[int] = set()
        self._why: dict[int, str] = {}
        self._pool: list[tuple[dict[str, Any], bytes | None]] = []
        self._pool_ref: Any = None
        self._shipped: set[str] = set()
        self._refs: list[Any] = []
        self._seed_base: int | None = None
        self._closed = False
        try:
            self.workers = [self._spawn(w) for w in range(n_workers)]
            self.worker_info = self._wait_started(self.workers)
            obs_space, act_space = self.ray.get(self.workers[0].spaces.remote())
        except BaseException:
            self.close()
            raise
        self._last_obs = np.zeros((n_envs, *obs_space.shape), np.float32)
        super().__init__(n_envs, obs_space, act_space)

    # ------------------------------------------------------------ the actors
    def _spawn(self, w: int) -> Any:
        sl = self._slices[w]
        opts = dict(num_cpus=self._cpus, max_restarts=0, scheduling_strategy="SPREAD")
        return self._actor_cls.options(**opts).remote(  # type: ignore[attr-defined]
            sl.stop - sl.start, worker_index=w, **self._worker_args)

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
                self._dead.add(i)
                self._why[i] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
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
        try:
            self.ray.kill(self.workers[w], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        actor = self._spawn(w)
        info = self._wait_started([actor])[0]
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
                 "new_pid": info["pid"], "new_node": info["node_id"], "time": time.time()}
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
        from brawlkit.league.records import BASELINE_ID

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
        payload = [(m.to_json(), (Path(league_dir) / m.blob).read_bytes() if m.blob else None)
                   for m in new]
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
            o, infos = out if out is not None else self._replace(w)
            obs[sl] = o
            self.reset_infos[sl] = infos
        self._reset_seeds()
        self._reset_options()
        self._last_obs = obs.copy()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        acts = np.asarray(actions, np.float32)
        self._refs = [None if w in self._dead else a.step.remote(np.ascontiguousarray(acts[sl]))
                      for w, (a, sl) in enumerate(zip(self.workers, self._slices, strict=True))]

    def step_wait(self) -> VecEnvStepReturn:
        n = self.num_envs
        outs = self._gather(self._refs)
        self._refs = []
        obs = np.empty((n, *self.observation_space.shape), np.float32)  # type: ignore[misc]
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
            for j in range(sl.stop - sl.start):
                i = sl.start + j
                done = bool(te[j] or tr[j])
                inf[j]["TimeLimit.truncated"] = bool(tr[j] and not te[j])
                dones[i] = done
                if done:
                    inf[j]["terminal_observation"] = o[j]
                    resets.setdefault(w, {})[j] = opponent_spec(self.sampler)
                infos[i] = inf[j]
        if resets:
            self._ship_for([s for d in resets.values() for s in d.values()])
            refs: list[Any] = [None] * len(self.workers)
            for w, specs in resets.items():
                if w not in self._dead:
                    refs[w] = self.workers[w].reset_some.remote(specs)
            back = self._gather(refs)
            for w in resets:
                if back[w] is None:  # lost between its step and the reset: cut the rest too
                    self._dead.add(w)
                    continue
                for j, (o, info) in back[w].items():
                    obs[self._slices[w].start + j] = o
                    self.reset_infos[self._slices[w].start + j] = info
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

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ray = self.ray
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
