"""Reward tiers: pinned time-pressure values, the Fibonacci streak cap, the presets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from brawlkit.env.rewards import (
    TIERS,
    LlmFightingReward,
    OutcomeReward,
    TieredReward,
    TierWeights,
    fibonacci,
    make_reward,
    reward_preset,
    time_pressure_half_life,
    time_pressure_multiplier,
)
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import PlayerState, Snapshot

M = int(C.BP_MATCH_TICKS)
ACT = np.zeros(6, np.float32)


def player(x=0.0, y=0.0, damage=0.0, stocks=3, flags=int(C.BP_PLAYER_FLAG_ON_GROUND), slot=0, state=0):
    return PlayerState(x, y, 0.0, 0.0, damage, 60.0, stocks, 1, flags, state, 0, 2, slot)


def snap(ticks_left, me=None, op=None, phase=int(C.BP_PHASE_PLAYING), winner=int(C.BP_WINNER_NONE)):
    me = me or player(-10.0)
    op = op or player(10.0, slot=1)
    return Snapshot(0, M - ticks_left, 1, ticks_left, phase, winner, 2, 2, 0, (me, op), b"")


# ---------------------------------------------------------------- tier 4
def test_time_pressure_pinned_values():
    assert time_pressure_multiplier(M) == pytest.approx(1 / 3, abs=1e-12)
    assert time_pressure_multiplier(0) == 1.0
    assert time_pressure_multiplier(round(14.4 * 60)) == pytest.approx(0.9, abs=1e-3)
    assert time_pressure_half_life() / 60 == pytest.approx(150 / math.log2(3), rel=1e-12)
    # monotone: more time left, less pressure
    vals = [time_pressure_multiplier(t) for t in range(0, M + 1, 500)]
    assert all(a > b for a, b in zip(vals, vals[1:], strict=False))


def test_time_pressure_scales_idle_penalty_by_match_clock_not_steps():
    w = TierWeights(idle_grace_s=0.0, on_stage_per_s=0.0)
    far_me, far_op = player(-60.0), player(60.0, slot=1)
    out = {}
    for left in (M, 864, 4):
        r = TieredReward(w)
        first = snap(left + 4, far_me, far_op)
        r.reset(first, 0)
        # one step of 4 ticks, idle and far apart
        total, parts = r(first, snap(left, far_me, far_op), 0, 4, ACT)
        idle = parts["activity"] + parts["time_pressure"]
        assert total == pytest.approx(sum(parts.values()))
        out[left] = idle
        m = time_pressure_multiplier(left)
        assert idle == pytest.approx(-w.idle_per_s * m * 4 / 60)
        assert parts["activity"] == pytest.approx(-w.idle_per_s * (1 / 3) * 4 / 60)
    assert out[M] > out[864] > out[4]  # penalty grows as the clock runs down
    # fastforward: 12 ticks elapsed in one step cost 3x the 4-tick step at the same clock
    r = TieredReward(w)
    first = snap(876, far_me, far_op)
    r.reset(first, 0)
    _, p12 = r(first, snap(864, far_me, far_op), 0, 12, ACT)
    assert p12["activity"] + p12["time_pressure"] == pytest.approx(3 * out[864], rel=1e-2)


def test_close_to_opponent_is_not_idle():
    w = TierWeights(idle_grace_s=0.0)
    r = TieredReward(w)
    first = snap(M, player(-5.0), player(5.0, slot=1))
    r.reset(first, 0)
    _, parts = r(first, snap(M - 4, player(-5.0), player(5.0, slot=1)), 0, 4, ACT)
    assert parts["activity"] == 0.0 and parts["time_pressure"] == 0.0


# ---------------------------------------------------------------- tier 5
def _survive_only(w: TierWeights, step_ticks=4):
    r = TieredReward(w)
    s = snap(M)
    r.reset(s, 0)
    bonuses = []
    for left in range(M - step_ticks, -1, -step_ticks):
        nxt = snap(left)
        _, parts = r(s, nxt, 0, step_ticks, ACT)
        bonuses.append(parts["streak"])
        s = nxt
    return bonuses


def test_fibonacci():
    assert [fibonacci(i) for i in range(1, 10)] == [1, 1, 2, 3, 5, 8, 13, 21, 34]


def test_streak_is_fibonacci_and_capped():
    w = TierWeights(streak_interval_s=10.0, streak_unit=0.01, streak_cap_index=6)
    paid = [b for b in _survive_only(w) if b > 0]
    n = M // 600
    assert len(paid) == n
    expect = [0.01 * fibonacci(min(k, 6)) for k in range(1, n + 1)]
    assert paid == pytest.approx(expect)
    assert max(paid) == pytest.approx(w.streak_cap_bonus()) == pytest.approx(0.01 * 8)


def test_survive_only_policy_cannot_farm_past_the_cap():
    w = TierWeights()
    bonuses = _survive_only(w)
    # no single interval pays more than the capped Fibonacci value ...
    assert max(bonuses) <= w.streak_cap_bonus() + 1e-12
    # ... so a whole match of pure survival earns at most the capped sum,
    assert sum(bonuses) == pytest.approx(w.streak_max_total())
    # which stays far below what winning is worth (stocks + terminal bonus).
    assert sum(bonuses) < 0.5 * (w.win + 3 * w.stock_taken)
    # An uncapped streak would have paid F(15) for the last interval alone.
    assert max(bonuses) < w.streak_unit * fibonacci(M // 600)


def test_streak_resets_on_lost_stock():
    w = TierWeights(streak_interval_s=1.0, streak_unit=1.0, streak_cap_index=20)
    r = TieredReward(w)
    s = snap(M)
    r.reset(s, 0)
    got = []
    for i in range(1, 4):  # survive 3 s: F(1) F(2) F(3)
        nxt = snap(M - 60 * i)
        got.append(r(s, nxt, 0, 60, ACT)[1]["streak"])
        s = nxt
    assert got == [1, 1, 2]
    died = snap(M - 240, me=player(-10.0, stocks=2))
    assert r(s, died, 0, 60, ACT)[1]["streak"] == 0.0
    after = snap(M - 300, me=player(-10.0, stocks=2))
    assert r(died, after, 0, 60, ACT)[1]["streak"] == 1.0  # back to F(1)


# ---------------------------------------------------------------- tier 1 / 2
def test_outcome_and_survival_tiers():
    r = TieredReward()
    s0 = snap(M)
    r.reset(s0, 0)
    s1 = snap(M - 4, player(-10.0), player(10.0, damage=12.0, slot=1))
    _, parts = r(s0, s1, 0, 4, ACT)
    assert parts["outcome"] == pytest.approx(0.12)
    assert parts["survival"] == pytest.approx(0.002 * 4 / 60)
    off = player(-100.0, flags=int(C.BP_PLAYER_FLAG_OFFSTAGE))
    _, parts = r(s1, snap(M - 8, off, player(10.0, damage=12.0, slot=1)), 0, 4, ACT)
    assert parts["survival"] == pytest.approx(-0.05 * 4 / 60)
    win = snap(M - 12, player(), player(10.0, stocks=0, slot=1), phase=int(C.BP_PHASE_OVER), winner=0)
    _, parts = r(s1, win, 0, 4, ACT)
    assert parts["outcome"] == pytest.approx(3.0 + 3 * 1.0)  # three stocks + win
    assert set(parts) == set(TIERS)


# ---------------------------------------------------------------- presets
def test_llm_fighting_preset_telescopes_to_the_outcome():
    r = make_reward("llm_fighting")
    assert isinstance(r, LlmFightingReward)
    s = snap(M)
    r.reset(s, 0)
    total_outcome = 0.0
    # take a stock early, keep the lead to a timeout win
    states = [snap(M - 600, op=player(10.0, stocks=2, slot=1))]
    states += [snap(left, op=player(10.0, stocks=2, slot=1)) for left in (4000, 1000, 100)]
    states.append(snap(0, op=player(10.0, stocks=2, slot=1), phase=int(C.BP_PHASE_OVER), winner=0))
    per_step = []
    for nxt in states:
        _, parts = r(s, nxt, 0, 4, ACT)
        per_step.append(parts["outcome"])
        total_outcome += parts["outcome"]
        s = nxt
    assert total_outcome == pytest.approx(r.w.outcome_scale)
    assert per_step[0] < per_step[-1] + per_step[-2]  # the lead is worth more near the buzzer
    # damage term is clamped
    big = snap(M - 4, op=player(10.0, damage=500.0, slot=1))
    r.reset(snap(M), 0)
    _, parts = r(snap(M), big, 0, 4, ACT)
    assert parts["damage"] == pytest.approx(r.w.damage_clip)


def test_make_reward_factory_and_overrides():
    assert isinstance(make_reward("outcome"), OutcomeReward)
    t = make_reward("tiered:win=5,streak_cap_index=4")
    assert isinstance(t, TieredReward) and t.w.win == 5.0 and t.w.streak_cap_index == 4
    assert make_reward() is not make_reward()  # fresh state per env
    assert isinstance(reward_preset("tiered"), TierWeights)
    with pytest.raises(ValueError):
        make_reward("nope")
    with pytest.raises(ValueError):
        make_reward("tiered:bogus=1")


def test_tiered_outcome_tier_is_the_shared_outcome_arithmetic() -> None:
    """TieredReward writes tier 1 out inline (it runs every env step); it must stay the
    arithmetic of ``_outcome_terms`` — the one OutcomeReward uses — to the last bit."""
    from brawlkit.env.rewards import _outcome_terms

    rng = np.random.default_rng(3)
    w = TierWeights(damage_dealt=0.013, damage_taken=0.007, stock_taken=1.3, stock_lost=0.9,
                    win=3.5, loss=2.5, draw=0.7)
    for k in range(2000):
        slot = int(rng.integers(0, 2))
        players = [[player(float(rng.uniform(-50, 50)), damage=float(rng.uniform(0, 150)),
                           stocks=int(rng.integers(0, 4)), slot=s) for s in (0, 1)] for _ in (0, 1)]
        over = k % 5 == 0
        prev = snap(5000, *players[0])
        cur = snap(4996, *players[1], phase=int(C.BP_PHASE_OVER if over else C.BP_PHASE_PLAYING),
                   winner=int(rng.choice([C.BP_WINNER_NONE, 0, 1, C.BP_WINNER_DRAW])))
        r = TieredReward(w)
        r.reset(prev, slot)
        _, tiers = r(prev, cur, slot, 4, ACT)
        assert tiers["outcome"] == _outcome_terms(prev, cur, slot, w.damage_dealt, w.damage_taken,
                                                  w.stock_taken, w.stock_lost, w.win, w.loss,
                                                  w.draw), k
