"""PPO's rollout with both cores busy: the server steps one half of the arenas while the
trainer decides the other half.

SB3's ``collect_rollouts`` is serial: one forward for every env, then ``env.step`` waits
while the game server ticks every arena, then the buffer — so on two cores the server's
core idles while the trainer computes and the trainer's idles while it waits.  Here the
envs are two halves A and B, each stepped by the fast lane's batched step in two parts
(``send_rows`` / ``recv_rows``, brawlkit/env/vecenv.py), and the work interleaves::

    forward A(t), send A(t)            (once per rollout)
    forward B(t), send B(t)            <- the server steps A(t) meanwhile
    receive A(t)
    forward A(t+1), send A(t+1)        <- the server steps B(t) meanwhile
    receive B(t); record step t

The other kind, the *overlapped* serial rollout, keeps SB3's order of forward passes
(one for every env) and moves only the bookkeeping: step t is recorded — monitor,
callbacks, episode statistics, time-limit bootstrap, buffer — after step t+1's commands
went out, while the server ticks them::

    forward(t+1), send(t+1)
    record step t                      <- the server steps t+1 meanwhile
    receive(t+1)

Every recorded step is what SB3 records (the same buffer entries, callbacks, episode
statistics, time-limit bootstrap); the overlapped rollout draws the same sampling noise
as SB3's, the pipelined one draws it half by half (as reproducible, not bit-identical).  Envs that cannot take a batched step (a custom reward, input
delay, a non-BRAWLPIT env) fall back to SB3's own loop, and a half that cannot take one
mid-rollout is stepped the general way.  Whether it pays depends on the machine's load
at the time, so :class:`RolloutChooser` times both kinds of rollout as training runs and
takes the faster of the two (re-trying the other every few rollouts).
``TrainConfig.pipeline`` turns both off (SB3's own loop); the counts of each kind are
logged (``rollout/pipelined``, ``rollout/serial``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecMonitor

from brawlkit.env.vecenv import BrawlpitVecEnv


@dataclass
class _Decision:
    """One half's forward: SB3's actions (unclipped, what the buffer keeps), the clipped
    ones sent, the value estimates and log-probabilities."""

    actions: np.ndarray
    clipped: np.ndarray
    values: th.Tensor
    log_probs: th.Tensor


def _brawlpit_vec(env: VecEnv) -> tuple[VecMonitor | None, BrawlpitVecEnv] | None:
    """(the VecMonitor around it or None, the BrawlpitVecEnv) when ``env`` is one."""
    if isinstance(env, BrawlpitVecEnv):
        return None, env
    if isinstance(env, VecMonitor) and isinstance(env.venv, BrawlpitVecEnv):
        return env, env.venv
    return None


def _monitor(mon: VecMonitor | None, rewards: np.ndarray, dones: np.ndarray,
             infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """VecMonitor's per-step bookkeeping (``info["episode"]`` of an ended episode) for a
    step it did not see: the parts were stepped below it."""
    if mon is None:
        return infos
    mon.episode_returns += rewards
    mon.episode_lengths += 1
    for i in np.flatnonzero(dones).tolist():
        info = dict(infos[i])
        info["episode"] = {"r": mon.episode_returns[i], "l": mon.episode_lengths[i],
                           "t": round(time.time() - mon.t_start, 6)}
        mon.episode_count += 1
        mon.episode_returns[i] = 0
        mon.episode_lengths[i] = 0
        if mon.results_writer:
            mon.results_writer.write_row(info["episode"])
        infos[i] = info
    return infos


class RolloutChooser:
    """Which rollout is faster *now*: the pipelined one pays only while the machine has
    a core for the server beside the trainer; on a busy machine the serial one wins.  So
    both are timed as they run, and each rollout takes the faster one, trying the other
    again every :attr:`probe_every` rollouts (the load may have changed)."""

    probe_every = 8

    def __init__(self) -> None:
        self.seconds: dict[bool, float | None] = {True: None, False: None}
        self.rollouts = 0
        self.counts = {True: 0, False: 0}

    def pick(self) -> bool:
        """True: the pipelined rollout next; False: the overlapped serial one."""
        for mode in (True, False):
            if self.seconds[mode] is None:
                return mode
        best = min((True, False), key=lambda m: self.seconds[m] or 0.0)
        self.rollouts += 1
        return (not best) if self.rollouts % self.probe_every == 0 else best

    def record(self, mode: bool, seconds: float) -> None:
        """A rollout's wall-clock: the newest measurement of its mode (half the weight
        on the old one, so a change of load shows within a few rollouts)."""
        old = self.seconds[mode]
        self.seconds[mode] = seconds if old is None else 0.5 * (old + seconds)
        self.counts[mode] += 1


class PipelinedRollout(PPO):
    """SB3's PPO whose rollout keeps the game server and the trainer busy at once (the
    module docstring), and whose update may run in its own process during the next
    rollout (:mod:`brawlkit.training.update_worker`); saving and loading are PPO's."""

    #: overlap the server's work with the trainer's (``TrainConfig.pipeline``): the
    #: pipelined or the overlapped rollout, whichever is faster; False: SB3's own loop
    pipeline: bool = True
    #: the update in its own process, overlapped with the next rollout
    #: (``TrainConfig.async_update``); False: SB3's order, update then rollout
    async_update: bool = False

    def _excluded_save_params(self) -> list[str]:
        # how this process runs the loop, not what the checkpoint is
        return [*super()._excluded_save_params(), "async_update", "_update_worker", "_rollout_chooser"]

    def update_now(self) -> None:
        """PPO's update on the rollout buffer, here and now (SB3's ``train``)."""
        PPO.train(self)

    def train(self) -> None:
        """SB3 calls this after every rollout: the update now, or with ``async_update``
        the previous rollout's update collected and this one's started in the update
        process (one rollout of policy lag, update_worker.py)."""
        if not self.async_update:
            self.update_now()
            return
        worker = self.start_update_worker()
        worker.collect(self)
        worker.submit(self)

    def start_update_worker(self) -> Any:
        """The update process, started now if it is not running.  ``configure_loop``
        (training/ppo.py: every model built or loaded to train) starts it early, so its
        boot — importing torch and SB3, about a second — overlaps the envs' start and the
        first rollout instead of delaying the first update."""
        worker = self.__dict__.get("_update_worker")
        if worker is None:
            from brawlkit.training.update_worker import UpdateWorker

            worker = self.__dict__["_update_worker"] = UpdateWorker()
        return worker

    def worker_extras(self) -> dict[str, Any]:
        """Attributes the update needs that the zip leaves out (KLPPO: its reference)."""
        return {}

    def finish_update(self) -> None:
        """Wait for an update in flight and load it: the model then holds every update."""
        worker = self.__dict__.get("_update_worker")
        if worker is not None:
            worker.collect(self)

    def close_update_worker(self) -> None:
        """Stop the update process, if one runs (an update in flight is dropped)."""
        worker = self.__dict__.pop("_update_worker", None)
        if worker is not None:
            worker.close()

    def learn(self, *args: Any, **kwargs: Any) -> Any:
        """SB3's ``learn``; with ``async_update`` it returns once the last update is in."""
        try:
            out = super().learn(*args, **kwargs)
        except BaseException:
            self.close_update_worker()
            raise
        self.finish_update()
        return out

    def _decide(self, obs: np.ndarray) -> _Decision:
        with th.no_grad():
            actions, values, log_probs = self.policy(obs_as_tensor(obs, self.device))
        acts = actions.cpu().numpy()
        space: Any = self.action_space
        low, high = space.low, space.high
        return _Decision(acts, np.clip(acts, low, high), values, log_probs)

    def collect_rollouts(self, env: VecEnv, callback: BaseCallback, rollout_buffer: Any,
                         n_rollout_steps: int) -> bool:
        vec = _brawlpit_vec(env)
        if (not self.pipeline or vec is None or vec[1].num_envs < 2 or self.use_sde
                or not vec[1].rows_batchable(0, vec[1].num_envs)):
            return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps)
        chooser = self.__dict__.setdefault("_rollout_chooser", RolloutChooser())
        pipelined = chooser.pick()
        t0 = time.perf_counter()
        if pipelined:
            ok = self._pipelined_rollout(vec, callback, rollout_buffer, n_rollout_steps)
        else:
            ok = self._overlapped_rollout(vec, callback, rollout_buffer, n_rollout_steps)
        chooser.record(pipelined, time.perf_counter() - t0)
        self.logger.record("rollout/pipelined", chooser.counts[True])
        self.logger.record("rollout/serial", chooser.counts[False])
        return ok

    def _pipelined_rollout(self, vec: tuple[VecMonitor | None, BrawlpitVecEnv],
                           callback: BaseCallback, rollout_buffer: Any,
                           n_rollout_steps: int) -> bool:
        mon, venv = vec
        last = self._last_obs
        assert isinstance(last, np.ndarray)
        obs: np.ndarray = last
        n = venv.num_envs
        m = n // 2
        self.policy.set_training_mode(False)
        rollout_buffer.reset()
        callback.on_rollout_start()
        ahead: _Decision | None = None  # half A's decision for this step, already sent
        new_obs = obs
        for step in range(n_rollout_steps):
            if ahead is None:
                a = self._decide(obs[:m])
                sent_a = venv.rows_batchable(0, m)
                if sent_a:
                    venv.send_rows(0, m, a.clipped)
            else:
                a, sent_a = ahead, True
            b = self._decide(obs[m:])
            if sent_a and venv.rows_batchable(m, n):
                venv.send_rows(m, n, b.clipped)
                res_a = venv.recv_rows(0, m)
                ahead = None
                if step + 1 < n_rollout_steps and venv.rows_batchable(0, m):
                    ahead = self._decide(np.asarray(res_a[0]))
                    venv.send_rows(0, m, ahead.clipped)
                res_b = venv.recv_rows(m, n)
            else:  # a half that cannot take a batched step now: both the general way
                res_a = venv.recv_rows(0, m) if sent_a else venv.step_rows(0, m, a.clipped)
                res_b = venv.step_rows(m, n, b.clipped)
                ahead = None
            res = (np.concatenate([res_a[0], res_b[0]]), np.concatenate([res_a[1], res_b[1]]),
                   np.concatenate([res_a[2], res_b[2]]), list(res_a[3]) + list(res_b[3]))
            both = _Decision(np.concatenate([a.actions, b.actions]), np.concatenate([a.clipped, b.clipped]),
                             th.cat([a.values, b.values]), th.cat([a.log_probs, b.log_probs]))
            if not self._record(mon, callback, rollout_buffer, obs, both, res):
                if ahead is not None:  # the half sent ahead: its step is taken, not recorded
                    venv.recv_rows(0, m)
                return False
            new_obs, dones = res[0], res[2]
            obs = new_obs
        with th.no_grad():
            values = self.policy.predict_values(obs_as_tensor(new_obs, self.device))
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _overlapped_rollout(self, vec: tuple[VecMonitor | None, BrawlpitVecEnv],
                            callback: BaseCallback, rollout_buffer: Any,
                            n_rollout_steps: int) -> bool:
        """SB3's serial rollout — one forward for every env, one batched step — with the
        bookkeeping of step t (monitor, callbacks, episode statistics, time-limit
        bootstrap, buffer) done while the server steps t+1: the trainer's share of a step
        that does not need the next observation fills the wait for it."""
        mon, venv = vec
        last = self._last_obs
        assert isinstance(last, np.ndarray)
        obs: np.ndarray = last
        n = venv.num_envs
        self.policy.set_training_mode(False)
        rollout_buffer.reset()
        callback.on_rollout_start()
        pending: tuple[np.ndarray, _Decision, Any] | None = None  # a step not yet recorded
        for _ in range(n_rollout_steps):
            d = self._decide(obs)
            sent = venv.rows_batchable(0, n)
            if sent:
                venv.send_rows(0, n, d.clipped)
            if pending is not None and not self._record(mon, callback, rollout_buffer, *pending):
                if sent:  # the step sent is taken, not recorded
                    venv.recv_rows(0, n)
                return False
            res = venv.recv_rows(0, n) if sent else venv.step_rows(0, n, d.clipped)
            pending = (obs, d, res)
            obs = np.asarray(res[0])
        assert pending is not None
        if not self._record(mon, callback, rollout_buffer, *pending):
            return False
        with th.no_grad():
            values = self.policy.predict_values(obs_as_tensor(obs, self.device))
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=pending[2][2])
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _record(self, mon: VecMonitor | None, callback: BaseCallback, rollout_buffer: Any,
                obs: np.ndarray, d: _Decision, res: Any) -> bool:
        """Book one step as SB3's ``collect_rollouts`` does (the names of its locals are
        what callbacks read); False when a callback stops training."""
        new_obs, rewards, dones = np.asarray(res[0]), np.asarray(res[1]), np.asarray(res[2])
        infos = _monitor(mon, rewards, dones, list(res[3]))
        actions, clipped_actions = d.actions, d.clipped  # noqa: F841 (callbacks read them)
        values, log_probs = d.values, d.log_probs  # noqa: F841
        self.num_timesteps += len(dones)
        callback.update_locals(locals())
        if not callback.on_step():
            return False
        self._update_info_buffer(infos, dones)
        self._bootstrap_time_limits(rewards, dones, infos)
        rollout_buffer.add(obs, actions, rewards, self._last_episode_starts, d.values, d.log_probs)
        self._last_obs = new_obs
        self._last_episode_starts = dones
        return True

    def _bootstrap_time_limits(self, rewards: np.ndarray, dones: np.ndarray,
                               infos: list[dict[str, Any]]) -> None:
        """SB3's timeout handling: a truncated episode's reward gets the discounted value
        of its last observation (SB3 issue #633)."""
        for idx in np.flatnonzero(dones).tolist():
            info = infos[idx]
            if info.get("terminal_observation") is not None and info.get("TimeLimit.truncated"):
                terminal_obs = self.policy.obs_to_tensor(info["terminal_observation"])[0]
                with th.no_grad():
                    terminal_value = self.policy.predict_values(terminal_obs)[0]  # type: ignore[arg-type]
                rewards[idx] += self.gamma * terminal_value
