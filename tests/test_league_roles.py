"""PFSP weightings, the payoff record and the three roles' opponent choice."""

from __future__ import annotations

import numpy as np
import pytest

from brawlkit.export import bpw as ex
from brawlkit.league.opponents import BaselinePolicy, FrozenOpponent
from brawlkit.league.pfsp import Payoff, pfsp_weights
from brawlkit.league.records import Member, permanent_ids
from brawlkit.league.roles import LeagueExploiterSampler, MainExploiterSampler, MainSampler


def _permanent() -> list[Member]:
    return [Member(id=i, role="baseline" if i == "baseline" else "cpu") for i in permanent_ids()]


def _trained(role: str, n: int) -> list[Member]:
    return [Member(id=f"{role}-g{g}", role=role, generation=g, blob=f"artifacts/{role}-g{g}.bpw",
                   settings={"action_repeat": 4}) for g in range(n)]


def _chi2(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = counts.sum() * probs
    return float(((counts - expected) ** 2 / expected).sum())


def test_weightings_follow_the_pseudocode():
    p = np.array([0.0, 0.25, 0.5, 1.0])
    np.testing.assert_allclose(pfsp_weights(p, "squared"), (1 - p) ** 2 / ((1 - p) ** 2).sum())
    np.testing.assert_allclose(pfsp_weights(p, "variance"), p * (1 - p) / (p * (1 - p)).sum())
    np.testing.assert_allclose(pfsp_weights(p, "linear"), (1 - p) / (1 - p).sum())
    capped = np.minimum(0.5, 1 - p)
    np.testing.assert_allclose(pfsp_weights(p, "linear_capped"), capped / capped.sum())
    # all wins: squared/linear weights vanish -> uniform, never NaN (DI-engine's bug)
    for w in ("squared", "variance", "linear", "linear_capped"):
        np.testing.assert_allclose(pfsp_weights([1.0, 1.0, 1.0], w), [1 / 3] * 3)
    np.testing.assert_allclose(pfsp_weights([0.0, 0.0], "variance"), [0.5, 0.5])  # all losses
    with pytest.raises(ValueError, match="weighting"):
        pfsp_weights([0.5], "cubic")


def test_payoff_counts_decays_and_defaults_to_one_half():
    pay = Payoff(decay=1.0)
    assert pay.win_rate("x") == 0.5
    for o in ("win", "win", "draw", "loss"):
        pay.record("x", o)
    assert pay.win_rate("x") == pytest.approx(2.5 / 4)
    d = Payoff(decay=0.5)
    d.record("y", "loss")
    d.record("y", "win")  # the old loss weighs half: (1) / (0.5 + 1)
    assert d.win_rate("y") == pytest.approx(1 / 1.5)


def test_no_games_draws_uniformly_then_follows_the_results(tmp_path):
    s = MainSampler(tmp_path, 2, 4, seed=1, pfsp_share=1.0, exploiter_share=0.0)
    s.refresh(_permanent() + _trained("main", 3))
    ids = s.ids()
    counts = np.array([0] * len(ids))
    for _ in range(6000):
        counts[ids.index(s.choose())] += 1
    assert _chi2(counts, np.full(len(ids), 1 / len(ids))) < 30  # 11 dof, p ~ 0.002
    rng = np.random.default_rng(0)
    for i, x in enumerate(ids):  # win rates 0.1 .. 0.9 (by playing many games)
        for _ in range(200):
            s.record(x, "win" if rng.random() < 0.1 + 0.07 * i else "loss")
    probs = pfsp_weights([s.payoff.win_rate(x) for x in ids], "squared")
    counts[:] = 0
    for _ in range(20000):
        counts[ids.index(s.choose())] += 1
    assert _chi2(counts, probs) < 35


def test_main_branches_and_selfplay_fallback(tmp_path):
    s = MainSampler(tmp_path, 2, 4, seed=2, pfsp_share=0.0, exploiter_share=0.5, struggle=0.3,
                    selfplay_floor=0.3, payoff_decay=1.0)
    s.refresh(_permanent())
    assert s.choose() in permanent_ids()  # no Main checkpoint yet: PFSP over the pool
    s.refresh(_permanent() + _trained("main", 3) + _trained("main_exploiter", 2))
    for _ in range(20):  # beats both exploiters: the exploiter branch is empty -> self-play
        s.record("main_exploiter-g0", "win")
        s.record("main_exploiter-g1", "win")
    picks = {s.choose() for _ in range(200)}
    assert picks == {"main-g2"} and s.last_branch == "selfplay"
    for _ in range(60):
        s.record("main_exploiter-g1", "loss")  # struggles with one exploiter: 20 / 80
        s.record("main-g2", "loss")  # and with its newest self: history by variance
    picks = [s.choose() for _ in range(400)]
    assert "main_exploiter-g1" in picks and "main_exploiter-g0" not in picks
    # main-g2 is in the history too, but p = 0 gives it variance weight 0
    assert {p for p in picks if p.startswith("main-")} <= {"main-g0", "main-g1"}


def test_main_exploiter_switches_below_the_threshold_and_back(tmp_path):
    s = MainExploiterSampler(tmp_path, 2, 4, seed=3, threshold=0.2, reset_every=4, payoff_decay=1.0)
    s.refresh(_permanent() + _trained("main", 4))
    assert s.choose() == "main-g3" and s.last_branch == "main"  # p = 0.5 >= 0.2
    for _ in range(10):
        s.record("main-g3", "loss")
    picks = {s.choose() for _ in range(300)}
    assert s.last_branch == "main_history" and picks <= {"main-g0", "main-g1", "main-g2"}
    for _ in range(10):
        s.record("main-g3", "win")  # 10 / 20 = 0.5 again
    assert s.choose() == "main-g3"
    assert [g for g in range(12) if s.wants_reset(g)] == [3, 7, 11]


def test_league_exploiter_resets_with_its_probability(tmp_path):
    s = LeagueExploiterSampler(tmp_path, 2, 4, seed=4, reset_p=0.25)
    s.refresh(_permanent() + _trained("main", 2))
    n = sum(s.wants_reset(g) for g in range(4000))
    assert abs(n / 4000 - 0.25) < 0.03
    assert s.choose() in s.ids()


def test_members_of_another_action_repeat_are_not_drawn(tmp_path):
    s = MainSampler(tmp_path, 2, 2, seed=5)
    s.refresh(_permanent() + _trained("main", 2))  # recorded with action repeat 4
    assert s.ids() == list(permanent_ids())


def test_frozen_opponent_plays_its_blob_and_reads_a_layout_prefix(tmp_path):
    rng = np.random.default_rng(0)
    layers = [ex.Layer(rng.standard_normal((8, 31)).astype(np.float32), np.zeros(8, np.float32), 1),
              ex.Layer(rng.standard_normal((6, 8)).astype(np.float32), np.zeros(6, np.float32), 0)]
    (tmp_path / "m.bpw").write_bytes(ex.pack_bpw(layers, ex.PolicyMeta(4, 1, "tiered")))
    m = Member(id="main-x", role="main", blob="m.bpw", settings={"action_repeat": 4})
    f = FrozenOpponent(m, tmp_path, env_layout=2)  # a layout-1 member in a layout-2 env
    obs = rng.uniform(-1, 1, 79).astype(np.float32)
    a = f(obs)
    assert f.label == "main-x" and a.shape == (6,) and np.all(np.abs(a) <= 1)
    np.testing.assert_array_equal(a, FrozenOpponent(m, tmp_path, env_layout=1)(obs[:31]))
    (tmp_path / "w.bpw").write_bytes(ex.pack_bpw(
        [ex.Layer(np.zeros((6, 79), np.float32), np.zeros(6, np.float32), 0)], ex.PolicyMeta(4, 2, "")))
    with pytest.raises(ValueError, match="layout 2"):
        FrozenOpponent(Member(id="w", role="main", blob="w.bpw"), tmp_path, env_layout=1)


def test_baseline_walks_in_and_attacks():
    from brawlkit.env.observation import build_input
    from brawlkit.tools.parity import P, snapshot_bytes

    b = BaselinePolicy()
    far = build_input(snapshot_bytes(P(x=-40.0), P(x=40.0, facing=-1), 3000), 0, 2)
    assert b(far)[0] == 1.0 and b(far)[3] == -1.0  # walks right, no attack
    near = build_input(snapshot_bytes(P(x=0.0), P(x=5.0, facing=-1), 3000), 0, 2)
    presses = [b(near)[3] for _ in range(4)]
    assert sorted(presses) == [-1.0, -1.0, 1.0, 1.0]  # press, release, press, release


def test_main_draws_the_kind_first_so_a_big_pool_does_not_crowd_out_the_fixed_ones(tmp_path):
    """Today's mixture (fixed share 0, PFSP over everyone) lets ~100 own checkpoints
    drown the 9 fixed opponents; a reserved fixed share keeps its share at any pool size,
    the fixed opponents drawn by the ladder curriculum (unlocked rung by rung)."""
    from brawlkit.league.roles import FIXED_LADDER

    pool = _permanent() + _trained("main", 100) + _trained("main_exploiter", 5)
    crowded = MainSampler(tmp_path, 2, 4, seed=3, pfsp_share=0.5, exploiter_share=0.15)
    crowded.refresh(pool)
    picks = [crowded.choose() for _ in range(4000)]
    assert sum(p in permanent_ids() for p in picks) / len(picks) < 0.1  # the crowding

    s = MainSampler(tmp_path, 2, 4, seed=3, fixed_share=0.25, pfsp_share=0.35,
                    exploiter_share=0.15, pfsp_pool="learned", pfsp_window=10)
    s.refresh(pool)
    picks = [s.choose() for _ in range(8000)]
    fixed = [p for p in picks if p in permanent_ids()]
    assert abs(len(fixed) / len(picks) - 0.25) < 0.02
    assert set(fixed) == {FIXED_LADDER[0]}  # only the first rung is unlocked yet
    assert s.branch_counts["fixed"] == len(fixed)
    pfsp = [p for p in picks if p.startswith("main-g")]  # PFSP and self-play picks
    assert {int(p.split("-g")[1]) for p in pfsp} >= {99} and min(
        int(p.split("-g")[1]) for p in pfsp) >= 90  # the window: each role's newest 10
    for _ in range(10):  # wins the first rung: the next one unlocks, p(1-p) spreads the draws
        s.record(FIXED_LADDER[0], "win")
    assert s.ladder.unlocked == 2
    assert set(p for p in (s.choose() for _ in range(2000)) if p in permanent_ids()) \
        == set(FIXED_LADDER[:2])
    state = s.state_dict()
    again = MainSampler(tmp_path, 2, 4, seed=99, fixed_share=0.25)
    again.load_state_dict(state)
    assert again.ladder.unlocked == 2  # the ladder resumes with the run


def test_fixed_share_with_no_learned_member_falls_back_to_the_ladder(tmp_path):
    s = MainSampler(tmp_path, 2, 4, seed=4, fixed_share=0.0, pfsp_share=0.6, pfsp_pool="learned")
    s.refresh(_permanent())  # nothing trained yet: PFSP over learned members and self-play
    assert {s.choose() for _ in range(50)} == {"cpu:1"}  # are the ladder's first rung
    with pytest.raises(ValueError, match="sum to <= 1"):
        MainSampler(tmp_path, 2, 4, fixed_share=0.5, pfsp_share=0.4, exploiter_share=0.2)
