"""PFSP weightings, the payoff record, the roles' opponent choice, and the roles as data (one
declaration per role, a toy role added through its declaration and trained)."""

from __future__ import annotations

import json

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
    s = MainSampler(tmp_path, 2, 4, seed=1, fixed_share=0.0, pfsp_share=1.0, exploiter_share=0.0,
                    pfsp_pool="all", pfsp_window=0)
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
    s = MainSampler(tmp_path, 2, 4, seed=2, fixed_share=0.0, pfsp_share=0.0, exploiter_share=0.5,
                    struggle=0.3, selfplay_floor=0.3, pfsp_pool="all", payoff_decay=1.0)
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


def test_main_struggles_with_the_exploiters_that_beat_what_ships(tmp_path):
    """``verify_matches`` > 0: the struggle test reads how Main's deterministic policy did
    in its verification matches, not its sampled training games, where the exploiters'
    frozen means lose about half (the branch stayed dormant on that record alone)."""
    kw = {"fixed_share": 0.0, "pfsp_share": 0.0, "exploiter_share": 1.0, "struggle": 0.3,
          "verify_matches": 4, "pfsp_window": 2, "payoff_decay": 1.0}
    pool = _permanent() + _trained("main", 2) + _trained("main_exploiter", 3)
    s = MainSampler(tmp_path, 2, 4, seed=4, **kw)
    s.refresh(pool)
    exploiters = [f"main_exploiter-g{g}" for g in range(3)]
    # what to verify: the newest pfsp_window exploiters, verify_matches each
    assert s.verification() == (exploiters[1:], 4)
    for _ in range(10):  # its own games: even against every exploiter -> none struggling
        for x in exploiters:
            s.record(x, "win")
            s.record(x, "loss")
    assert s.struggling() == []
    assert s.choose() == "main-g1" and s.last_branch == "selfplay"
    # what ships lost 3 of 4 to g2 and drew the 4th, and won every match against g1
    rates = s.record_verified([(exploiters[2], "loss")] * 3 + [(exploiters[2], "draw")]
                              + [(exploiters[1], "win")] * 4)
    assert rates == {exploiters[2]: 0.125, exploiters[1]: 1.0}
    assert s.struggling() == [exploiters[2]]  # g0 unverified: its own record (0.5)
    assert {s.choose() for _ in range(50)} == {exploiters[2]} and s.last_branch == "exploiters"
    assert s.stats()["exploiters_struggling"] == 1.0
    # the record travels with the sampler's state: a resumed run struggles with the same
    t = MainSampler(tmp_path, 2, 4, seed=5, **kw)
    t.refresh(pool)
    t.load_state_dict(s.state_dict())
    assert t.struggling() == [exploiters[2]]
    # a new verification replaces the old record: Main now beats g2
    s.record_verified([(exploiters[2], "win")] * 4)
    assert s.struggling() == []
    # off by default: nothing to verify
    assert MainSampler(tmp_path, 2, 4).verification() == ([], 0)


def test_patch_share_sends_games_to_what_beats_what_ships_only_while_it_does(tmp_path):
    """``patch_share``: while Main's verified record says it struggles with a main exploiter,
    that share of its games goes to it before the mixture is drawn (on top of the mixture's
    own exploiter share); once it beats them the mixture is exactly the one without it."""
    kw = {"fixed_share": 0.5, "pfsp_share": 0.2, "exploiter_share": 0.15, "struggle": 0.3,
          "verify_matches": 4, "pfsp_window": 10, "payoff_decay": 1.0}
    pool = _permanent() + _trained("main", 2) + _trained("main_exploiter", 2)
    s = MainSampler(tmp_path, 2, 4, seed=6, patch_share=0.5, **kw)
    plain = MainSampler(tmp_path, 2, 4, seed=6, **kw)
    for x in (s, plain):
        x.refresh(pool)
        x.record_verified([("main_exploiter-g1", "loss")] * 4 + [("main_exploiter-g0", "win")] * 4)
    n = 4000
    drawn = [(s.choose(), s.last_branch) for _ in range(n)]
    picks = [p for p, _ in drawn]
    # only the one it struggles with is patched (g0 still comes up by PFSP, as without it)
    assert {p for p, b in drawn if b in ("patch", "exploiters")} == {"main_exploiter-g1"}
    patched = sum(p == "main_exploiter-g1" and b in ("patch", "exploiters") for p, b in drawn) / n
    assert abs(patched - (0.5 + 0.5 * 0.15)) < 0.03  # patch, then the mixture's own branch
    assert s.stats()["branch/patch"] == pytest.approx(0.5, abs=0.03)
    assert picks.count("main_exploiter-g1") / n > 3 * [plain.choose() for _ in range(n)].count(
        "main_exploiter-g1") / n
    # Main beats both now: the patch branch is empty and draws nothing from the rng
    for x in (s, plain):
        x.record_verified([("main_exploiter-g1", "win")] * 4 + [("main_exploiter-g0", "win")] * 4)
        x.rng = np.random.default_rng(9)
    assert [s.choose() for _ in range(300)] == [plain.choose() for _ in range(300)]
    with pytest.raises(ValueError, match=r"main's patch_share must be in \[0, 1\]"):
        MainSampler(tmp_path, 2, 4, patch_share=1.5)


def test_patch_pool_newest_sends_the_share_to_the_newest_exploiter_until_main_beats_it_every_time(
        tmp_path):
    """``patch_pool = "newest"`` (league harden's focused rounds): the share goes to the
    newest main exploiter alone, whether or not Main is below ``struggle`` against it, and
    stops only once Main's deterministic policy won every verification match; an older
    exploiter Main loses to is the mixture's business, not the patch's."""
    kw = {"fixed_share": 0.5, "pfsp_share": 0.2, "exploiter_share": 0.15, "struggle": 0.3,
          "verify_matches": 4, "pfsp_window": 10, "payoff_decay": 1.0, "patch_share": 0.6}
    pool = _permanent() + _trained("main", 2) + _trained("main_exploiter", 3)
    s = MainSampler(tmp_path, 2, 4, seed=8, patch_pool="newest", **kw)
    struggling = MainSampler(tmp_path, 2, 4, seed=8, **kw)
    for x in (s, struggling):
        x.refresh(pool)
        # Main loses to g0, beats the newest (g2) 3 of 4: above struggle, short of every time
        x.record_verified([("main_exploiter-g0", "loss")] * 4 + [("main_exploiter-g2", "win")] * 3
                          + [("main_exploiter-g2", "loss")])
    assert s.patch_targets() == ["main_exploiter-g2"]
    assert struggling.patch_targets() == ["main_exploiter-g0"]
    n = 3000
    drawn = [(s.choose(), s.last_branch) for _ in range(n)]
    assert {p for p, b in drawn if b == "patch"} == {"main_exploiter-g2"}
    assert sum(b == "patch" for _, b in drawn) / n == pytest.approx(0.6, abs=0.03)
    # won every verification match against the newest: no patch, whatever else it loses to
    s.record_verified([("main_exploiter-g0", "loss")] * 4 + [("main_exploiter-g2", "win")] * 4)
    assert s.patch_targets() == []
    assert all(s.choose() and s.last_branch != "patch" for _ in range(300))
    with pytest.raises(ValueError, match="main's patch_pool must be one of"):
        MainSampler(tmp_path, 2, 4, patch_pool="oldest")


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


def test_a_held_target_stays_the_lineages_main_until_its_reset(tmp_path):
    """--exploiter-target held: the Main that was newest when the lineage started, while
    Main registers newer ones; its fallback is Main's history up to it; a reset lets go
    (the next lineage takes Main's newest) and a resumed run holds the same Main."""
    s = MainExploiterSampler(tmp_path, 2, 4, seed=3, target="held", reset_every=2,
                             payoff_decay=1.0)
    s.refresh(_permanent() + _trained("main", 2))
    assert s.choose() == "main-g1" and s.last_branch == "main"
    s.refresh(_permanent() + _trained("main", 4))  # Main moved on twice
    assert s.choose() == "main-g1"
    for _ in range(10):
        s.record("main-g1", "loss")
    assert {s.choose() for _ in range(200)} <= {"main-g0", "main-g1"}  # never past it
    assert s.last_branch == "main_history"
    resumed = MainExploiterSampler(tmp_path, 2, 4, seed=3, target="held", reset_every=2,
                                   payoff_decay=1.0)
    resumed.refresh(_permanent() + _trained("main", 4))
    resumed.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert resumed.held == "main-g1"
    assert not s.wants_reset(0) and s.held == "main-g1"
    assert s.wants_reset(1) and s.held is None  # the lineage ends: the next one takes g3
    assert s.choose() == "main-g3"
    newest = MainExploiterSampler(tmp_path, 2, 4, seed=3, payoff_decay=1.0)  # the default
    newest.refresh(_permanent() + _trained("main", 4))
    assert newest.target == "newest" and newest.choose() == "main-g3"
    with pytest.raises(ValueError, match="target"):
        MainExploiterSampler(tmp_path, 2, 4, target="oldest")


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
    # a layout-2 member in a layout-3 env (the clock appended) reads its 79 values
    clock_obs = np.append(rng.uniform(-1, 1, 79), 0.5).astype(np.float32)
    w = FrozenOpponent(Member(id="w", role="main", blob="w.bpw"), tmp_path, env_layout=3)
    np.testing.assert_array_equal(w(clock_obs), FrozenOpponent(
        Member(id="w", role="main", blob="w.bpw"), tmp_path, env_layout=2)(clock_obs[:79]))


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
    crowded = MainSampler(tmp_path, 2, 4, seed=3, fixed_share=0.0, pfsp_share=0.5,
                          exploiter_share=0.15, pfsp_pool="all", pfsp_window=0)
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
    with pytest.raises(ValueError, match=r"main's exploiter_share must be <= 1 \(the rest is self-play"):
        MainSampler(tmp_path, 2, 4, fixed_share=0.5, pfsp_share=0.4, exploiter_share=0.2)


# ------------------------------------------------------------------ roles as data
def test_a_sampler_built_bare_starts_from_its_roles_one_declaration(tmp_path):
    """Every role's defaults are its declaration's: a sampler built without options, the
    TrainConfig a run uses and the declaration agree (there is no second set)."""
    from brawlkit.league.role_specs import ROLE_SPECS, role_names
    from brawlkit.training.config import TrainConfig

    assert role_names() == ("main", "main_exploiter", "league_exploiter")
    cfg = TrainConfig()
    for spec in ROLE_SPECS.values():
        bare = spec.sampler_class()(tmp_path, 2, 4)
        assert bare.role == spec.name and bare.options == spec.defaults() == spec.options_from(cfg)
    assert cfg.main_fixed_share == 0.5 and cfg.main_pfsp_pool == "learned"  # the shipped mixture
    with pytest.raises(ValueError, match=r"main_exploiter's reset_every must be >= 1, got 0"):
        MainExploiterSampler(tmp_path, 2, 4, reset_every=0)
    with pytest.raises(ValueError, match=r"exploiter_threshold must be in \[0, 1\], got 1.5"):
        TrainConfig.from_dict({"exploiter_threshold": 1.5})
    with pytest.raises(ValueError, match=r"main_pfsp_pool must be one of \('learned', 'all'\)"):
        TrainConfig.from_dict({"main_pfsp_pool": "some"})


#: a role added by its one declaration, in a fresh interpreter (roles are declared before
#: TrainConfig is built), then trained through the real CLI for two tiny generations in a
#: league; prints what the records, the plots and the page made of it
TOY_ROLE = r'''
import json, runpy, sys
from brawlkit.league.role_specs import ResetRule, RoleOption, RoleSpec, declare_role
from brawlkit.league.roles import LeagueSampler


class LadderClimber(LeagueSampler):
    """The toy: the fixed ladder only (its p(1 - p) curriculum), or Main's newest with
    ``main_share`` once there is a Main."""

    main_share: float

    def choose(self):
        mains = self.ids("main")
        if mains and self.rng.random() < self.main_share:
            return self._take("main", mains[-1])
        return self._fixed()


declare_role(RoleSpec(
    name="ladder_climber", sampler=LadderClimber, colour="#bcbd22", flag_prefix="climber",
    reset=ResetRule("every", "reset_every"),
    options=(RoleOption("main_share", 0.5, "share of games against Main's newest", 0.0, 1.0),
             RoleOption("reset_every", 2, "fresh weights every K generations", low=1))))

league, run, tiny = sys.argv[1], sys.argv[2], sys.argv[3:]
out = {}


def cli(*args):
    sys.argv = ["brawlkit", *args]
    try:
        runpy.run_module("brawlkit", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        return e.code or 0
    return 0


out["bad_flag_rc"] = cli("train", "--role", "ladder_climber", "--climber-main-share", "2",
                         "--league-dir", league, "--run-dir", run + "-bad", "--no-progress")
out["rc"] = cli("train", "--role", "ladder_climber", "--climber-reset-every", "1",
                "--climber-main-share", "0.25", "--league-dir", league, "--run-dir", run,
                "--no-progress", "--generations", "2", *tiny)

from matplotlib.colors import to_hex
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import MemberId
from brawlkit.registry import league_page
from brawlkit.report import league_overview as overview
from brawlkit.report import league_plots as lp

members = [m for m in LeagueDir(league, create=False).members() if not m.permanent]
out["members"] = [[m.id, m.role, m.generation, m.parent] for m in members]
out["parsed_roles"] = [MemberId.parse(m.id).role for m in members]
out["settings"] = {k: members[0].settings[k] for k in ("climber_main_share", "climber_reset_every")}
view = lp.LeagueView.load(league, bootstrap=0)
out["plot_colour"] = lp.ROLE_COLOURS.get("ladder_climber")
ax = lp.plot_elo_drift(view, roles=["ladder_climber"])
out["line_colours"] = sorted({to_hex(ln.get_color()) for ln in ax.get_lines()})
out["legend"] = [t.get_text() for t in ax.get_legend().get_texts()]
gens, share = overview.opponent_draws(view, "ladder_climber")
out["draws"] = {g: [float(x) for x in v] for g, v in share.items() if v.any()}
out["resetting"] = list(overview.RESETTING_ROLES)
out["page_colour"] = league_page.ROLE_COLOURS.get("ladder_climber")
out["page_badge"] = league_page._colour({"kind": "bot", "role": "ladder_climber"})
out["lineage"] = league_page._lineages([{**m.to_json(), "status": "ok"} for m in members], None)
try:
    declare_role(RoleSpec(name="too_late", sampler=LadderClimber, colour="#000000",
                          flag_prefix="late"))
except RuntimeError as e:
    out["too_late"] = str(e)
print(json.dumps(out))
'''


@pytest.mark.training
@pytest.mark.servers
def test_a_toy_role_added_by_its_declaration_trains_and_shows_everywhere(tmp_path):
    import json
    import subprocess
    import sys

    from helpers import ROOT

    # full matches (a match is at most 9000 ticks: 1125 steps at action repeat 8), so each
    # of the 2 envs finishes a training match in each generation
    tiny = ["--steps-per-generation", "2304", "--n-envs", "2", "--n-steps", "128",
            "--batch-size", "256", "--n-epochs", "1", "--action-repeat", "8",
            "--eval-levels", "1", "--eval-episodes", "1"]
    script = tmp_path / "toy_role.py"
    script.write_text(TOY_ROLE)
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "league"),
                        str(tmp_path / "run"), *tiny], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # its flags are TrainConfig's, checked as declared
    assert out["bad_flag_rc"] == 2 and "climber_main_share must be in [0, 1], got 2.0" in r.stderr
    assert out["rc"] == 0
    # the records: two generations of the role, the second a new lineage (reset every 1)
    assert [m[1:] for m in out["members"]] == [["ladder_climber", 0, None],
                                               ["ladder_climber", 1, None]]
    assert out["parsed_roles"] == ["ladder_climber"] * 2
    assert out["settings"] == {"climber_main_share": 0.25, "climber_reset_every": 1}
    # its sampler ran: no Main in the league, so every training game was on the fixed ladder
    assert set(out["draws"]) <= {"cpu", "baseline"} and out["draws"]
    assert all(abs(sum(v[i] for v in out["draws"].values()) - 1) < 1e-9 for i in range(2))
    # its colour, the same in the plots, the overview and the page
    assert out["plot_colour"] == out["page_colour"] == out["page_badge"] == "#bcbd22"
    assert "#bcbd22" in out["line_colours"] and out["legend"] == ["ladder_climber"]
    assert out["resetting"] == ["main_exploiter", "league_exploiter", "ladder_climber"]
    assert 'data-role="ladder_climber"><span class="role" style="background:#bcbd22"' \
        in out["lineage"]
    assert "before brawlkit.training.config" in out["too_late"]


def test_the_overview_reads_the_exploiters_edge_and_mains_verification(tmp_path):
    """From the league's own log: each main exploiter generation's win rate (draws half)
    in its training games against Main's members, and Main's verified standing (its
    deterministic policy's eval matches against main exploiters: lowest and mean)."""
    import matplotlib

    matplotlib.use("Agg")
    from brawlkit.league.directory import LeagueDir
    from brawlkit.league.records import MatchRecord, MemberId
    from brawlkit.report import league_overview as overview
    from brawlkit.report.league_plots import LeagueView

    pool = LeagueDir(tmp_path / "league")
    main = [str(MemberId("main", "20261204-000000-s0", g)) for g in range(2)]
    exp = [str(MemberId("main_exploiter", "20261204-000001-s0", g)) for g in range(3)]
    for role, ids in (("main", main), ("main_exploiter", exp)):
        for g, i in enumerate(ids):  # the exploiter's generation 2 starts a new lineage
            parent = None if g == 0 or (role == "main_exploiter" and g == 2) else ids[g - 1]
            pool.register(Member(id=i, role=role, generation=g, parent=parent))
    t = iter(range(1, 100))
    log = [MatchRecord(next(t), exp[0], main[0], res, ticks, "train:main_exploiter")
           for res, ticks in (("win", 100), ("win", 200), ("loss", 50), ("draw", 9000))]
    log += [MatchRecord(next(t), exp[1], "cpu:5", "win", 100, "train:main_exploiter"),
            MatchRecord(next(t), exp[1], main[1], "loss", 100, "train:main_exploiter"),
            MatchRecord(next(t), exp[1], main[0], "loss", 100, "train:main_exploiter"),
            MatchRecord(next(t), main[1], exp[0], "loss", 100, "train:main")]  # not verified
    log += [MatchRecord(next(t), main[1], b, res, 100, "eval") for b, res in
            ((exp[0], "win"), (exp[0], "loss"), (exp[1], "win"), (exp[1], "win"),
             ("cpu:5", "loss"))]
    with pool.writer("test") as w:
        w.write_many(log)
    view = LeagueView.load(pool.path, bootstrap=0)
    gens, edge, games, win_ticks = overview.exploiter_edge(view)
    assert gens == [0, 1] and edge.tolist() == [0.625, 0.0] and games.tolist() == [4, 2]
    assert win_ticks[0] == 150.0 and np.isnan(win_ticks[1])  # its two wins, 100 and 200
    vgens, lowest, mean = overview.verified_standing(view)
    assert vgens == [1] and lowest.tolist() == [0.5] and mean.tolist() == [0.75]
    ax = overview.plot_exploiter_edge(view)
    labelled = [ln for ln in ax.lines if not ln.get_label().startswith("_")]
    assert [list(ln.get_ydata()) for ln in labelled] == [[0.625, 0.0], [0.5], [0.75]]
    assert [list(ln.get_xdata()) for ln in ax.lines if ln not in labelled] == [[1.5, 1.5]]
    assert overview.resets(view.members, "main_exploiter") == [2]
