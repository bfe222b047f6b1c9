"""The /move endpoint (docs/move.md): a served checkpoint plays a full match through the
worker and is rated as its member; latency becomes delay frames; unknown moves are
replaced and penalised; bad requests get 422; the docs' moves table is generated.

Real processes on 127.0.0.1: ``policy serve`` (FastAPI), the stdlib example endpoint,
``policy play`` (the worker) against a real lockstep brawlpit_server, and ``elo``.
"""

from __future__ import annotations

import json
import math
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import ROOT, Listening, last_json, run_cli

from brawlkit.policy_server.moves import (
    BY_NAME,
    MOVES,
    NAMES,
    NEUTRAL,
    NO_MOVE,
    markdown_table,
    nearest_moves,
)
from brawlkit.policy_server.player import latency_ticks, stretches

EXAMPLE = ROOT / "examples" / "move_clients" / "random_server.py"
MEMBER = "move-ckpt-1"


def example(tmp: Path, *args: str) -> Listening:
    return Listening([sys.executable, str(EXAMPLE), "--port", "0", *args], tmp / f"example{len(args)}.log")


def http_json(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def fighter(**kw: Any) -> dict[str, Any]:
    f = dict(x=-40.0, y=0.0, vx=0.0, vy=0.0, damage=10.0, shield=60.0, stocks=3, facing=1, flags=1,
             action_state=0, hitstun_ticks=0, jumps_left=1, slot=0)
    f.update(kw)
    return f


def good_request() -> dict[str, Any]:
    return {"self": fighter(), "opponent": fighter(x=40.0, facing=-1, slot=1), "tick": 120,
            "ticks_left": 8880, "last_moves": ["jump", "attack"]}


def play(*args: str, timeout: float = 240) -> dict[str, Any]:
    r = run_cli("policy", "play", *args, "--json", timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return last_json(r.stdout)


# ----------------------------------------------------------------- pure rules
def test_docs_moves_table_is_generated() -> None:
    """docs/move.md's table is markdown_table() (regenerate: python -m brawlkit.policy_server.moves)."""
    doc = (ROOT / "docs" / "move.md").read_text()
    start = doc.index("<!-- moves table")
    block = doc[doc.index("\n", start) + 1:doc.index("<!-- end of moves table")].strip()
    assert block == markdown_table(), (
        "docs/move.md's moves table is stale: paste the output of "
        "`python -m brawlkit.policy_server.moves` between its markers")


def test_moves_latency_rule_and_stretches() -> None:
    assert NAMES[0] == NO_MOVE and len(set(NAMES)) == len(MOVES)
    # every move's own action vector maps back to it: each is reachable from PPO
    targets = np.stack([m.action_vector() for m in MOVES])
    assert list(nearest_moves(targets)) == list(range(len(MOVES)))
    assert [latency_ticks(s) for s in (0.0001, 1 / 60, 0.0167, 0.050, 0.051, 0.2)] == [1, 1, 2, 3, 4, 12]
    jump, left = BY_NAME["jump"], BY_NAME["left"]
    # left from 0; a jump decided at tick 4 with a 3-tick delay -> effective at 7
    s = stretches([(0, left), (7, jump)], 4, 12)
    assert s == [(4, 3, left.hold), (7, 4, jump.frames[0].command), (11, 1, jump.hold)]
    # a jump right after a jump: the first is released on the tick before the second
    s = stretches([(0, jump), (3, jump)], 0, 8)
    assert s == [(0, 2, jump.frames[0].command), (2, 1, NEUTRAL), (3, 4, jump.frames[0].command),
                 (7, 1, NEUTRAL)]


def test_moves_do_what_they_say_in_the_simulation() -> None:
    """Each move played tick by tick from a standing start (the in-process C sim): the
    shapes in MOVES are the ones the game rules need (full jump, press moves fire)."""
    from brawlkit.wire.constants import C
    from brawlkit.wire.protocol import parse_snapshot
    from brawlkit.wire.sim import InProcessMatch

    def play_move(name: str, ticks: int = 12) -> list[Any]:
        m = InProcessMatch(cpu_level=1, seed=1)
        m.reset(1)
        for _ in range(3):
            m.step(0.0, 0.0, 0, 1)
        start = parse_snapshot(m.snapshot()).players[0]
        out = [start]
        for t in range(ticks):
            sx, sy, b = BY_NAME[name].command_at(t)
            out.append(parse_snapshot(m.step(sx, sy, b, 1)).players[0])
        m.close()
        return out

    assert max(p.vy for p in play_move("jump")) > 2.3  # a full jump (a hop leaves at 1.6)
    assert any(p.action_state == C.BP_AS_UPSPECIAL for p in play_move("up_special"))
    assert any(p.action_state == C.BP_AS_ATTACK for p in play_move("attack"))
    assert any(p.action_state == C.BP_AS_SPECIAL for p in play_move("special"))
    assert play_move("shield")[-1].action_state == C.BP_AS_SHIELD
    run, walk = play_move("dash_right"), play_move("right")
    assert run[-1].x - run[0].x > walk[-1].x - walk[0].x > 0
    left = play_move("attack_left")
    assert left[-1].facing == -1 and any(p.action_state == C.BP_AS_ATTACK for p in left)
    assert play_move("no_move")[-1].action_state == C.BP_AS_IDLE


# ----------------------------------------------------------------- the served checkpoint
@pytest.fixture(scope="module")
def league(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A league directory with a tiny trained checkpoint registered as MEMBER."""
    from brawlkit.league.directory import LeagueDir
    from brawlkit.league.records import Member
    from brawlkit.training.ppo import scratch_checkpoint

    tmp = tmp_path_factory.mktemp("move_league")
    ckpt = scratch_checkpoint(tmp / "ckpt.zip", learn_steps=64)
    LeagueDir(tmp / "league").register(Member(id=MEMBER, role="main", generation=1), checkpoint=ckpt)
    return tmp / "league"


@pytest.fixture(scope="module")
def served(league: Path) -> Iterator[Listening]:
    """``policy serve`` of the member's artifact (no --member: it finds the member itself)."""
    from brawlkit.league.directory import LeagueDir

    art = LeagueDir(league, create=False).member(MEMBER).checkpoint
    assert art is not None
    srv = Listening([sys.executable, "-m", "brawlkit", "policy", "serve", "--checkpoint",
                     str(league / art), "--port", "0"], league.parent / "serve.log")
    yield srv
    srv.stop()


@pytest.mark.servers
@pytest.mark.training
def test_checkpoint_endpoint_plays_a_full_match_and_is_rated(served: Listening, league: Path) -> None:
    status, info = http_json("GET", served.url + "/info")
    assert status == 200 and info["member"] == MEMBER and info["decision_ticks"] == 4
    res = play("--endpoint", served.url, "--vs", "cpu:8", "--league-dir", str(league), "--seed", "3")
    assert res["member"] == MEMBER and res["decision_ticks"] == 4
    m = res["matches"][0]
    assert m["over"] and m["outcome"] in ("win", "loss", "draw") and m["recorded"]
    assert m["invalid_moves"] == 0 and m["failed_calls"] == 0, m["errors"]
    assert m["decisions"] >= m["ticks"] // 600 and set(m["moves"]) <= set(NAMES)
    assert m["delay_ticks"]["min"] >= 1
    r = run_cli("elo", "--league-dir", str(league), "--json", "--bootstrap", "0")
    assert r.returncode == 0, r.stderr
    rows = {row["id"]: row for row in last_json(r.stdout)["members"]}
    assert rows[MEMBER]["games"] == 1 and rows[MEMBER]["kind"] == "bot" and rows[MEMBER]["role"] == "main"
    assert rows["cpu:8"]["games"] == 1
    won = {"win": 1, "draw": 0, "loss": 0}[m["outcome"]]
    assert rows[MEMBER]["wins"] == won


@pytest.mark.servers
@pytest.mark.training
def test_bad_requests_get_422_naming_the_field(served: Listening) -> None:
    status, ok = http_json("POST", served.url + "/move", good_request())
    assert status == 200 and ok["move"] in NAMES and ok["logprob"] <= 0.0
    status, moves = http_json("GET", served.url + "/moves")
    assert status == 200 and [m["name"] for m in moves["moves"]] == list(NAMES)
    cases = [
        ({k: v for k, v in good_request().items() if k != "ticks_left"}, "ticks_left"),
        ({**good_request(), "self": {k: v for k, v in fighter().items() if k != "x"}}, "self.x"),
        ({**good_request(), "opponent": fighter(stocks=-1)}, "opponent.stocks"),
        ({**good_request(), "self": fighter(vx="fast")}, "self.vx"),
        ({**good_request(), "last_moves": ["jump", "moonwalk"]}, "last_moves[1]"),
        ({**good_request(), "last_moves": ["jump"] * 5}, "last_moves"),
        ({**good_request(), "frame": "bm90IGEgcG5n"}, "frame"),
    ]
    for body, field in cases:
        status, err = http_json("POST", served.url + "/move", body)
        assert status == 422, (field, err)
        assert field in err["message"], (field, err["message"])
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    status, ok = http_json("POST", served.url + "/move", {**good_request(), "frame": png})
    assert status == 200 and ok["move"] in NAMES  # a frame is accepted and ignored by PPO


@pytest.mark.training
def test_zip_and_its_bpw_choose_the_same_moves(league: Path, tmp_path: Path) -> None:
    """The SB3 zip and its exported .bpw answer alike; the blob (mean only) with logprob 0,
    the zip with the Gaussian's mass on the move (a probability: logprob <= 0), and the
    sampled blob (``export --sampled``, the std in it) with the zip's own logprob."""
    from brawlkit.export.cli import export_checkpoint
    from brawlkit.league.directory import LeagueDir
    from brawlkit.policy_server.policy import CheckpointPolicy, MoveRequest

    art = LeagueDir(league, create=False).member(MEMBER).checkpoint
    assert art is not None
    export_checkpoint(league / art, tmp_path / "p.bpw")
    export_checkpoint(league / art, tmp_path / "s.bpw", sampled=True)
    z, b = CheckpointPolicy(league / art), CheckpointPolicy(tmp_path / "p.bpw")
    s = CheckpointPolicy(tmp_path / "s.bpw")
    assert z.decision_ticks == b.decision_ticks == s.decision_ticks == 4
    rng = np.random.default_rng(0)
    for _ in range(50):
        req = good_request()
        req["self"].update(x=float(rng.uniform(-100, 100)), damage=float(rng.uniform(0, 150)))
        req["last_moves"] = list(rng.choice(NAMES, size=int(rng.integers(0, 5))))
        r = MoveRequest.model_validate(req)
        (mz, lz), (mb, lb), (ms, ls) = z.choose(r), b.choose(r), s.choose(r)
        assert mz == mb == ms and lb == 0.0 and -math.log(1043) <= lz <= 0.0
        assert ls == pytest.approx(lz, abs=1e-6)


@pytest.mark.servers
@pytest.mark.training
def test_frames_are_sent_as_png_and_ignored_by_ppo(served: Listening, tmp_path: Path) -> None:
    trace = tmp_path / "frames.jsonl"
    res = play("--endpoint", served.url, "--vs", "cpu:1", "--max-ticks", "24", "--frames",
               "--trace", str(trace))
    m = res["matches"][0]
    assert m["decisions"] >= 3 and m["failed_calls"] == 0 and m["invalid_moves"] == 0, m["errors"]


# ----------------------------------------------------------------- latency and invalid moves
@pytest.mark.servers
def test_slow_endpoint_plays_with_proportionally_more_delay(tmp_path: Path) -> None:
    fast, slow = example(tmp_path), example(tmp_path, "--sleep-ms", "50")
    try:
        out = {}
        for name, ep in (("fast", fast), ("slow", slow)):
            trace = tmp_path / f"{name}.jsonl"
            res = play("--endpoint", ep.url, "--vs", "cpu:3", "--member", "scripted",
                       "--max-ticks", "240", "--trace", str(trace))
            m = res["matches"][0]
            assert not m["recorded"] and m["ticks"] == 240
            lines = [json.loads(x) for x in trace.read_text().splitlines()]
            assert len(lines) == m["decisions"]
            for x in lines:  # each call's delay is ceil(latency x 60 ticks/s) (traced to the µs)
                lo, hi = (latency_ticks((x["latency_ms"] + e) / 1e3) for e in (-0.001, 0.001))
                assert lo <= x["delay_ticks"] <= hi, x
            out[name] = m
    finally:
        fast.stop()
        slow.stop()
    f, s = out["fast"], out["slow"]
    assert s["latency_ms"]["min"] >= 50.0
    assert s["delay_ticks"]["min"] >= 4  # 50 ms = 3 ticks, and any overhead crosses into the 4th
    assert s["delay_ticks"]["mean"] >= f["delay_ticks"]["mean"] + 2.5
    # the delay follows the latency: mean delay ~ mean latency x 60/s, rounded up
    for m in (f, s):
        assert m["latency_ms"]["mean"] * 0.06 <= m["delay_ticks"]["mean"] <= m["latency_ms"]["mean"] * 0.06 + 1
    assert s["decisions"] <= f["decisions"]


@pytest.mark.servers
def test_invalid_move_is_replaced_by_no_move_and_penalised(tmp_path: Path) -> None:
    ep = example(tmp_path, "--invalid-every", "5")
    try:
        trace = tmp_path / "trace.jsonl"
        res = play("--endpoint", ep.url, "--vs", "cpu:2", "--member", "scripted", "--max-ticks", "400",
                   "--trace", str(trace), "--invalid-penalty", "0.25")
    finally:
        ep.stop()
    m = res["matches"][0]
    n_bad = m["decisions"] // 5  # the example's every 5th answer is "moonwalk"
    assert m["decisions"] >= 50 and n_bad >= 10
    assert m["invalid_moves"] == n_bad and m["failed_calls"] == 0
    assert m["penalty"] == pytest.approx(0.25 * n_bad)
    assert m["reward"] == pytest.approx(m["outcome_reward"] - 0.25 * n_bad)
    assert m["moves"].get(NO_MOVE, 0) >= n_bad and "moonwalk" not in m["moves"]
    bad = [json.loads(x) for x in trace.read_text().splitlines() if '"moonwalk"' in x]
    assert len(bad) == n_bad and all(x["move"] == NO_MOVE and x["reward"] <= 0.25 for x in bad)


@pytest.mark.servers
def test_policy_files_of_every_layout_play_against_an_endpoint(tmp_path: Path) -> None:
    """``--vs FILE``: the env builds the widest input layout, so a layout-2 blob and a
    layout-3 (clock) blob each read their own first values and play a whole stretch."""
    from helpers import large_weight_checkpoint

    from brawlkit.export.cli import export_checkpoint

    ep = example(tmp_path)
    try:
        for layout in (2, 3):
            large_weight_checkpoint(tmp_path / f"l{layout}.zip", seed=layout, input_layout=layout)
            export_checkpoint(tmp_path / f"l{layout}.zip", tmp_path / f"l{layout}.bpw")
            m = play("--endpoint", ep.url, "--vs", str(tmp_path / f"l{layout}.bpw"), "--member",
                     "scripted", "--max-ticks", "240")["matches"][0]
            assert m["ticks"] == 240 and m["opponent"] == f"l{layout}", m
    finally:
        ep.stop()


@pytest.mark.servers
def test_play_refuses_a_league_dir_without_a_member(tmp_path: Path) -> None:
    ep = example(tmp_path)
    try:
        r = run_cli("policy", "play", "--endpoint", ep.url, "--league-dir", str(tmp_path / "lg"), timeout=60)
        assert r.returncode == 2 and "--member" in r.stderr
        r = run_cli("policy", "play", "--endpoint", ep.url, "--member", "cpu:3", "--league-dir",
                    str(tmp_path / "lg"), timeout=60)
        assert r.returncode == 2 and "permanent member" in r.stderr
    finally:
        ep.stop()
    r = run_cli("policy", "play", "--endpoint", "http://127.0.0.1:1", "--max-ticks", "8", timeout=60)
    assert r.returncode == 2 and "no endpoint" in r.stderr
