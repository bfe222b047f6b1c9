"""The pipelined rollout (brawlkit/training/rollout.py): halves of the arenas stepped
while the trainer decides the other half, recorded exactly as a serial rollout records."""

from __future__ import annotations

import functools
from contextlib import closing

import numpy as np
import pytest

from brawlkit.env import BrawlpitEnv
from brawlkit.env.rewards import make_reward
from brawlkit.env.vecenv import BrawlpitVecEnv
from brawlkit.training.config import TrainConfig
from brawlkit.training.ppo import build_model
from brawlkit.training.rollout import PipelinedRollout, RolloutChooser
from brawlkit.wire.server_process import ServerGroup


class _Always(RolloutChooser):
    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = mode

    def pick(self) -> bool:
        return self.mode


def _vec(group: ServerGroup, n: int) -> BrawlpitVecEnv:
    def make(i: int) -> BrawlpitEnv:
        return BrawlpitEnv(opponent=f"cpu:{1 + i % 4}", reward=make_reward("tiered"),
                           server=group.server_for(i), seed=40 + i, max_episode_steps=23 + 7 * i)
    return BrawlpitVecEnv([functools.partial(make, i) for i in range(n)])


@pytest.mark.servers
@pytest.mark.training
@pytest.mark.parametrize("pipelined", [True, False])
def test_a_pipelined_rollout_records_what_the_envs_did(pipelined: bool) -> None:
    """Replaying the recorded actions serially on fresh envs (same seeds) gives the
    recorded observations and rewards bit for bit: the halves, their order and every
    auto-reset (episodes truncated at different steps) are booked where they belong —
    and so for the overlapped serial rollout, which books step t during step t+1."""
    n, steps = 6, 64
    cfg = TrainConfig(n_envs=n, n_steps=steps, batch_size=64, n_epochs=1,
                      steps_per_generation=n * steps,
                      async_update=False)  # the buffer read below is the one updated here
    with ServerGroup(2 * n) as group, closing(_vec(group, n)) as venv, \
            closing(_vec(group, n)) as replay:
        model = build_model(cfg, venv)
        assert isinstance(model, PipelinedRollout)
        model._rollout_chooser = _Always(pipelined)
        model.learn(n * steps)
        buf = model.rollout_buffer
        # after the update SB3 has flattened the buffer's tensors env-major (rewards stay
        # (step, env)): back to (step, env, ...)
        observations = buf.observations.reshape(n, steps, -1).swapaxes(0, 1)
        actions = buf.actions.reshape(n, steps, -1).swapaxes(0, 1)
        rewards = buf.rewards
        # two halves a step, or one batched step
        assert venv.lane is not None and venv.lane.batched_steps == (2 if pipelined else 1) * steps
        assert venv.lane.fallbacks == 0
        replay.seed(cfg.seed)  # as SB3 seeded the training envs (set_random_seed)
        obs = replay.reset()
        truncated_any = False
        for t in range(steps):
            assert np.array_equal(observations[t], obs), t
            obs, rew, dones, infos = replay.step(np.clip(actions[t], -1, 1))
            for i in range(n):  # a truncated step's reward also carries SB3's bootstrap
                if dones[i] and infos[i].get("TimeLimit.truncated"):
                    truncated_any = True
                    continue
                assert rewards[t, i] == np.float32(rew[i]), (t, i)
        assert truncated_any


@pytest.mark.servers
@pytest.mark.training
def test_the_chooser_takes_the_faster_rollout_and_keeps_probing() -> None:
    c = RolloutChooser()
    assert c.pick() is True
    c.record(True, 2.0)
    assert c.pick() is False
    c.record(False, 1.0)
    picks = [c.pick() for _ in range(2 * c.probe_every)]
    assert picks.count(False) == 2 * c.probe_every - 2 and picks.count(True) == 2


@pytest.mark.servers
@pytest.mark.training
def test_the_overlapped_rollout_books_exactly_what_sb3s_loop_books() -> None:
    """Same seeds, same envs: the overlapped serial rollout (bookkeeping of step t during
    step t+1) fills the buffer bit for bit as SB3's own loop does — observations, actions,
    rewards, episode starts, values, log-probabilities and the advantages after it."""
    n, steps = 4, 48
    cfg = TrainConfig(n_envs=n, n_steps=steps, batch_size=64, n_epochs=1,
                      steps_per_generation=n * steps)
    bufs = []
    for overlapped in (True, False):
        with ServerGroup(n) as group, closing(_vec(group, n)) as venv:
            model = build_model(cfg, venv)
            assert isinstance(model, PipelinedRollout)
            model._rollout_chooser = _Always(False)
            model.pipeline = overlapped  # False: SB3's own collect_rollouts
            model._setup_learn(n * steps)
            model.collect_rollouts(model.env, model._init_callback(None), model.rollout_buffer, steps)
            b = model.rollout_buffer
            bufs.append([b.observations.copy(), b.actions.copy(), b.rewards.copy(),
                         b.episode_starts.copy(), b.values.copy(), b.log_probs.copy(),
                         b.advantages.copy()])
            assert model._rollout_chooser.counts[False] == int(overlapped)  # which loop ran
    for got, want in zip(*bufs, strict=True):
        assert np.array_equal(got, want)
