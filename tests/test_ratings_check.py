"""Ratings that tell the truth, on a small league built from real matches (issue 27).

The fixed ladder played in C (every pair of CPU levels, ``bp_match_cpu_vs_cpu_ex``, as
``cputable`` plays it) orders the CPU levels as the levels and anchors the scale; a
learned member (a real PPO checkpoint, registered with its ``.bpw``) is evaluated
deterministically on fresh matches by ``elo --check --fresh`` — a real subprocess with
real game servers — and the check, run again on the log that now holds those
matches, finds the predicted win probability inside the measured 95 % interval for at
least 90 % of the (member, level) pairs.  Training episodes in the log (a sampled,
still-training policy) move nobody's rating.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from helpers import last_json, run_cli

from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import ANCHOR, league_table
from brawlkit.league.records import Member, cpu_id
from brawlkit.league.sink import MatchSink
from brawlkit.training.ladder import CPU_GAMES, ensure_ladder, fingerprint, source
from brawlkit.wire.cpu_level import CPU_LEVELS

pytestmark = [pytest.mark.servers]


def _member(league: LeagueDir, member_id: str, seed: int) -> Member:
    """A real learned member: an SB3 PPO of the project's network (action repeat 8, so a
    test match is short), saved, exported and registered as training registers one."""
    import torch

    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.export.actor import actor_layers
    from brawlkit.export.bpw import pack_bpw
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import build_model, policy_meta

    cfg = TrainConfig(seed=seed, n_envs=1, action_repeat=8)
    model = build_model(cfg, ZeroCostEnv(input_layout=cfg.input_layout))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.copy_((torch.rand(p.shape, generator=g) - 0.5) * 0.6)
    with tempfile.TemporaryDirectory() as td:
        zip_path, blob = Path(td) / "m.zip", Path(td) / "m.bpw"
        model.save(str(zip_path))
        blob.write_bytes(pack_bpw(actor_layers(model.policy), policy_meta(cfg)))
        return league.register(Member(id=member_id, role="main", generation=0,
                                      settings=cfg.to_dict()), checkpoint=zip_path, blob=blob)


@pytest.mark.timeout(900)
def test_the_ladder_orders_the_cpu_and_the_check_holds(tmp_path: Path) -> None:
    league = LeagueDir(tmp_path / "league")
    n = ensure_ladder(league, baseline_games=0)
    assert n == CPU_GAMES * len(CPU_LEVELS) * (len(CPU_LEVELS) - 1) // 2
    assert ensure_ladder(league, baseline_games=0) == 0  # once per league
    fp = fingerprint(baseline_games=0)
    ladder = [m for m in league.matches() if m.source == source(fp)]
    assert len(ladder) == n and len({m.seed for m in ladder}) == n and all(m.rated for m in ladder)

    member = _member(league, "main-check-g0000", seed=3)
    # the trainer's own episodes: lost every one, side a "training" — never rated
    with MatchSink(league, "train:main") as sink:
        sink.write([sink.record(member.id, "cpu:1", "loss", 100, a_policy="training")
                    for _ in range(40)])

    table = league_table(league.members(), league.matches(), bootstrap=50)
    bt = {r["id"]: r for r in table["members"]}
    levels = [bt[cpu_id(lv)]["bt_rating"] for lv in CPU_LEVELS]
    assert levels == sorted(levels) and len(set(levels)) == len(levels), levels  # the ladder's order
    assert table["anchor"] == {"id": ANCHOR[0], "rating": ANCHOR[1]}
    assert bt["cpu:1"]["bt_rating"] == ANCHOR[1] and bt["cpu:1"]["rating"] == pytest.approx(ANCHOR[1])
    row = bt[member.id]
    assert (row["games"], row["unrated"], row["few_games"]) == (0, 40, True)

    # out of sample: ratings that never saw the member's games predict nothing useful
    # about it, and the check says so pair by pair
    r = run_cli("elo", "--league-dir", str(league.path), "--check", "--fresh", "12",
                "--levels", "1,2,3", "--bootstrap", "50", timeout=800)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "vs the measured score (fresh deterministic matches, not in the ratings)" in r.stdout
    evals = [m for m in league.matches() if m.source == "eval"]
    assert len(evals) == 36 and {m.a for m in evals} == {member.id} and all(m.rated for m in evals)
    assert len({(m.b, m.seed) for m in evals}) == 36  # each a match of its own

    # in sample: the ratings now rest on those matches, and predict them
    r = run_cli("elo", "--league-dir", str(league.path), "--check", "--json", "--bootstrap", "50")
    assert r.returncode == 0, r.stderr[-3000:]
    res = last_json(r.stdout)
    pairs = res["check"]["pairs"]
    assert {(p["member"], p["vs"], p["games"]) for p in pairs} == {
        (member.id, cpu_id(lv), 12) for lv in (1, 2, 3)}
    assert sum(p["agree"] for p in pairs) >= 0.9 * len(pairs), pairs
    rows = {x["id"]: x for x in res["members"]}
    assert [rows[cpu_id(lv)]["bt_rating"] for lv in CPU_LEVELS] == sorted(
        rows[cpu_id(lv)]["bt_rating"] for lv in CPU_LEVELS)
    assert rows[member.id]["games"] == 36 and rows[member.id]["unrated"] == 40
