"""Vectorised BRAWLPIT envs for SB3.

:class:`BrawlpitVecEnv` keeps all N envs in the trainer's process and, each
step, sends all N commands (``step_send``) before it reads any snapshot
(``step_recv``).  The N servers are separate processes, so they tick in
parallel while this process waits once — no pipes, no extra Python processes
competing for the two cores (docs/benchmarks.md calibrates ~25 µs per
env-step against ~60–85 µs stepping them one by one).  Give each env
``parallel=N`` so its server knows it is stepped with N-1 others.
``SubprocVecEnv`` stays available (``make_vec_env(..., vec="subproc")``) for
comparison; ``python -m brawlkit bench train`` measures both.

The common case — lockstep, no input delay — goes through the *fast lane*
(brawlkit/env/fastlane.py): one C call sends every env's CMD, receives every snapshot
and builds every policy input; only the reward and the info stay per-env Python.  The
lane's inputs are bit-identical to the Python path's (tests/test_fastlane.py steps both
side by side); ``fast_lane=False`` turns it off.  The lane sends the commands of all the
envs on one server in BATCH datagrams and reads their snapshots from BATCH_SNAPs
(docs/protocol.md "Batches"): one datagram each way per step, not one per client;
``lane_batch=0`` sends each client's CMD from its own socket instead.

Auto-reset follows SB3's convention: on ``terminated or truncated`` the last
observation goes to ``info["terminal_observation"]``, ``info["TimeLimit.truncated"]``
says whether it was a time limit, and the returned observation is the first
of the next episode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from brawlkit.env.actions import ACT_DIM
from brawlkit.env.brawlpit import BrawlpitEnv
from brawlkit.env.fastlane import FastLane
from brawlkit.env.vec_kinds import DEFAULT_VEC, VEC_KINDS
from brawlkit.wire.constants import C


class BrawlpitVecEnv(DummyVecEnv):
    """N envs in one process; all commands go out before any snapshot is read.

    Works with any gym env; envs that offer ``step_send`` / ``step_recv`` (such
    as :class:`brawlkit.env.BrawlpitEnv`) get the split step, others a plain
    ``step``.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], fast_lane: bool = True,
                 lane_batch: int = int(C.BP_BATCH_MAX)):
        super().__init__(list(env_fns))
        self._lane_batch = lane_batch
        self._split = [
            hasattr(e.unwrapped, "step_send") and hasattr(e.unwrapped, "step_recv") and e is e.unwrapped
            for e in self.envs
        ]
        self.lane = self._make_lane() if fast_lane else None
        self._all_brawlpit = all(split and isinstance(e, BrawlpitEnv)
                                 for e, split in zip(self.envs, self._split, strict=True))
        #: each env's reward tiers summed over the steps of its current episode that the
        #: batched path ran (the env sums the others itself: ``episode_tiers``)
        self._ep_tiers = np.zeros((self.num_envs, 5), np.float64)
        self._ticks = np.zeros(self.num_envs, np.int64)  # each env's tick when its step was sent
        self._sent = np.zeros((self.num_envs, ACT_DIM), np.float32)  # ... and the action sent

    def _make_lane(self) -> Any:
        """A :class:`~brawlkit.env.fastlane.FastLane` for the BRAWLPIT envs (the first one's
        action_repeat and input layout), or None when there are none."""

        first = next((e for e, split in zip(self.envs, self._split, strict=True)
                      if split and isinstance(e, BrawlpitEnv)), None)
        if first is None:
            return None
        return FastLane(self.num_envs, first.action_repeat, first.input_layout, first._poll_us,
                        batch=self._lane_batch)

    def close(self) -> None:
        """The envs (their clients and servers), then the lane's batch sockets."""
        super().close()
        if self.lane is not None:
            self.lane.close()

    def step_all(self, acts: np.ndarray) -> list[Any]:
        """Every env's ``(obs, reward, terminated, truncated, info)`` for ``acts``, no
        auto-reset: every command goes out before any snapshot is read — the lane's
        envs in one C call, the others through ``step_send`` / ``step_recv``."""
        return self._step_results(0, self.num_envs, acts)

    def _step_results(self, lo: int, hi: int, acts: np.ndarray) -> list[Any]:
        """:meth:`step_all` for envs ``lo..hi`` (``acts``: their rows)."""
        envs, lane, split = self.envs, self.lane, self._split
        results: list[Any] = [None] * (hi - lo)
        in_lane: list[int] = []
        python: list[int] = []
        for i in range(lo, hi):
            env = envs[i]
            if not split[i]:
                results[i - lo] = env.step(acts[i - lo])
            elif lane is not None and lane.admit(i, env):
                in_lane.append(i)
            else:
                env.step_send(acts[i - lo])  # type: ignore[attr-defined]
                python.append(i)
        if in_lane:
            assert lane is not None
            full = acts if (lo, hi) == (0, self.num_envs) else np.zeros((self.num_envs, acts.shape[1]),
                                                                       np.float32)
            if full is not acts:
                full[lo:hi] = acts
            for i, result in lane.step(envs, in_lane, full):
                results[i - lo] = result
        for i in python:
            results[i - lo] = envs[i].step_recv()  # type: ignore[attr-defined]
        return results

    def step_wait(self) -> VecEnvStepReturn:
        if self._batchable():
            return self._step_batched()
        return self.step_rows(0, self.num_envs, self.actions)

    def _batchable(self) -> bool:
        """Whether this step can be the lane's batched step: every env a BRAWLPIT env in
        the lane, with a reward the lane computes (FastLane.step_batch)."""
        lane = self.lane
        if lane is None or not self._all_brawlpit:
            return False
        if lane.n_loaded < self.num_envs:
            for i, env in enumerate(self.envs):
                if not lane.admit(i, env):
                    return False
        return lane.batchable()

    def _add_batched_tiers(self, i: int, info: dict[str, Any]) -> None:
        """Env ``i``'s episode ended: its ``episode_tiers`` (the env's own sums of the
        steps Python ran) plus the sums of the steps the batched path ran."""
        if self.lane is None:
            return
        sums = info.setdefault("episode_tiers", {})
        for k, name in enumerate(self.lane.tier_names):
            sums[name] = sums.get(name, 0.0) + float(self._ep_tiers[i, k])
        self._ep_tiers[i] = 0.0

    def _step_batched(self) -> VecEnvStepReturn:
        """One batched step (no per-env Python but for the envs whose episode ended):
        inputs, rewards and episode ends of every arena as arrays from the lane; the
        per-step infos are empty dicts, and an ended episode's info is the env's full
        one plus ``episode_tiers`` (each reward tier summed over the episode)."""
        self.send_rows(0, self.num_envs, self.actions)
        return self.recv_rows(0, self.num_envs)

    def rows_batchable(self, lo: int, hi: int) -> bool:
        """Whether envs ``lo..hi`` can take a batched step now (each in the lane, with the
        lane's C reward), admitting those that left it (a reset) — for a caller that
        steps the envs in parts (training/rollout.py)."""
        lane = self.lane
        if lane is None or not self._all_brawlpit:
            return False
        if lane.batchable():  # every env in, each with the lane's reward: no per-env check
            return True
        for i in range(lo, hi):
            if not lane.admit(i, self.envs[i]) or not lane.rewarded[i]:
                return False
        return True

    def send_rows(self, lo: int, hi: int, actions: np.ndarray) -> None:
        """Send the commands of envs ``lo..hi`` (``actions``: their rows) in one lane call;
        :meth:`recv_rows` collects the answers (work may happen in between)."""
        lane = self.lane
        assert lane is not None
        self._ticks[lo:hi] = lane.view["tick"][2 * lo:2 * hi:2]
        self._sent[lo:hi] = actions
        lane.send_rows(self.envs, actions, lo, hi)

    def recv_rows(self, lo: int, hi: int) -> VecEnvStepReturn:
        """``(obs, rewards, dones, infos)`` of envs ``lo..hi`` once every answer is in; an
        env whose episode ended is reset (its info the env's full one, with
        ``terminal_observation`` and ``episode_tiers``), the others' infos empty."""
        lane = self.lane
        assert lane is not None
        inputs, rewards, tiers, terminated, truncated = lane.wait_rows(self.envs, self._sent[lo:hi],
                                                                       lo, hi)
        obs_buf = self.buf_obs[None]  # type: ignore[index]
        obs_buf[lo:hi] = inputs
        self.buf_rews[lo:hi] = rewards
        done = terminated | truncated
        self.buf_dones[lo:hi] = done
        self._ep_tiers[lo:hi] += tiers
        infos: list[dict[str, Any]] = [{} for _ in range(hi - lo)]
        for k in np.flatnonzero(done).tolist():
            i = lo + k
            info = lane.episode_info(i, self.envs[i],
                                     int(lane.view["tick"][2 * i]) - int(self._ticks[i]))
            info["TimeLimit.truncated"] = bool(truncated[k] and not terminated[k])
            info["terminal_observation"] = obs_buf[i].copy()
            self._add_batched_tiers(i, info)
            obs_buf[i], self.reset_infos[i] = self._reset_one(i)
            infos[k] = info
        self.buf_infos[lo:hi] = infos
        return (obs_buf[lo:hi].copy(), self.buf_rews[lo:hi].copy(), self.buf_dones[lo:hi].copy(),
                infos)

    def step_rows(self, lo: int, hi: int, actions: np.ndarray) -> VecEnvStepReturn:
        """A step of envs ``lo..hi`` alone whatever their state (the general path, each
        env's reward and info in Python): for a caller stepping parts whose part could
        not take a batched step."""
        results = self._step_results(lo, hi, actions)
        obs_buf = self.buf_obs[None]  # type: ignore[index]
        infos = []
        for k, (obs, rew, terminated, truncated, info) in enumerate(results):
            i = lo + k
            self.buf_rews[i] = rew
            done = bool(terminated or truncated)
            self.buf_dones[i] = done
            info["TimeLimit.truncated"] = bool(truncated and not terminated)
            if done:
                self._add_batched_tiers(i, info)
                info["terminal_observation"] = obs
                obs, self.reset_infos[i] = self._reset_one(i)
            obs_buf[i] = obs
            infos.append(info)
        return (obs_buf[lo:hi].copy(), self.buf_rews[lo:hi].copy(), self.buf_dones[lo:hi].copy(),
                infos)

    def _reset_one(self, i: int) -> tuple[np.ndarray, dict[str, Any]]:
        opts = self._options[i]
        return self.envs[i].reset(options=opts or None)

    def reset(self):  # type: ignore[override]
        obs_buf = self.buf_obs[None]  # type: ignore[index]
        for i, env in enumerate(self.envs):
            opts = self._options[i]
            obs, self.reset_infos[i] = env.reset(seed=self._seeds[i], options=opts or None)
            obs_buf[i] = obs
        self._reset_seeds()
        self._reset_options()
        return obs_buf.copy()


class NextOpponent(gym.Wrapper):
    """Holds the opponent for the env's next episode (for envs in subprocesses).

    With ``SubprocVecEnv`` the trainer's :class:`~brawlkit.league.OpponentSampler`
    cannot be called from inside the worker, so the trainer pushes the next
    pick with ``venv.env_method("set_next_opponent", spec, indices=[i])`` when
    episode *i* ends; the worker has already auto-reset by then, so the pick
    applies one episode later (documented lag of the subproc path).
    """

    def __init__(self, env: gym.Env, first: str | None = None):
        super().__init__(env)
        self.next_opponent = first

    def set_next_opponent(self, spec: str) -> None:
        self.next_opponent = spec

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        if self.next_opponent is not None and "opponent" not in options:
            options["opponent"] = self.next_opponent
        return self.env.reset(seed=seed, options=options)


def make_vec_env(env_fns: Sequence[Callable[[], gym.Env]], vec: str = DEFAULT_VEC) -> VecEnv:
    """``inproc`` (:class:`BrawlpitVecEnv`) or ``subproc`` (SB3 ``SubprocVecEnv``, fork)."""
    if vec == "inproc":
        return BrawlpitVecEnv(env_fns)
    if vec == "subproc":
        return SubprocVecEnv(list(env_fns), start_method="fork")
    raise ValueError(f"vec must be one of {VEC_KINDS}, got {vec!r}")
