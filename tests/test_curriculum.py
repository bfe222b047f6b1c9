"""brawlkit.league: the opponent-sampling interface and the CPU curriculum."""

from __future__ import annotations

import json

import pytest

from brawlkit.league.curriculum import CpuCurriculum, OpponentSampler


def test_curriculum_unlocks_after_half_of_last_k_wins():
    c = CpuCurriculum(k=4, seed=0)
    assert isinstance(c, OpponentSampler)
    assert c.max_level == 1 and {c.sample() for _ in range(20)} == {"cpu:1"}
    for o in ("win", "loss", "win"):
        c.record("cpu:1", o)
    assert c.max_level == 1  # only 3 games so far
    c.record("cpu:1", "win")  # 3 wins of the last 4 (>= half): unlock
    assert c.max_level == 2
    # a fresh level has p = 0.5 → the largest weight p(1−p)
    w = c.weights()
    assert w["cpu:2"] > w["cpu:1"]
    assert c.win_rate("cpu:2") == 0.5


def test_curriculum_weights_follow_p_one_minus_p_with_floor():
    c = CpuCurriculum(k=10, floor=0.05, start=3, seed=1)
    for _ in range(10):
        c.record("cpu:1", "win")          # p = 1   -> floor
    for i in range(10):
        c.record("cpu:2", "win" if i % 2 else "loss")  # p = .5 -> .25
    for i in range(10):
        c.record("cpu:3", "win" if i < 2 else "loss")  # p = .2 -> .16
    w = c.weights()
    assert w["cpu:1"] == pytest.approx(0.05 / (0.05 + 0.25 + 0.16))
    assert w["cpu:2"] == pytest.approx(0.25 / 0.46)
    draws = [c.sample() for _ in range(4000)]
    assert abs(draws.count("cpu:2") / 4000 - 0.25 / 0.46) < 0.03
    assert draws.count("cpu:1") > 0  # never starved
    c2 = CpuCurriculum(k=10, seed=5)
    c2.load_state_dict(json.loads(json.dumps(c.state_dict())))
    assert c2.weights() == w and c2.sample() == c.sample()


def test_sampler_interface_must_be_implemented():
    with pytest.raises(TypeError):
        OpponentSampler()  # type: ignore[abstract]
