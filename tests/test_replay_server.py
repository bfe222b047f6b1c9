"""brawlpit_server --record DIR (the C writer; the Python reader is brawlkit/replay/):
one .bpr per match that simulated a tick, written when it ends or is cut short
(RESET, a slot emptied, the arena reclaimed, shutdown), with the header fields of
brawlpit.h, and replaying its inputs through libbrawlpit.so reproduces final_hash and
the final players bit for bit."""

from __future__ import annotations

import ctypes
import random
import struct
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from helpers import RawClient

from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.sim import BpInput

pytestmark = pytest.mark.servers

# brawlpit.h BpReplayHeader / BpReplayRun (a minimal reader; brawlkit/replay/ has the real one)
_HEADER = struct.Struct("<4sHHIIIBBBBIQQ32s32sI16s")
_RUN = struct.Struct("<IffIffI")
_PLAYERS = 2 * ctypes.sizeof(P.NetPlayer)
assert _HEADER.size == C.BP_REPLAY_HEADER_SIZE and _RUN.size == 28


class Bpr(NamedTuple):
    magic: bytes
    version: int
    header_size: int
    seed: int
    match_id: int
    arena_id: int
    mode: int
    cpu_level: int
    complete: int
    winner: int
    n_ticks: int
    final_hash: int
    start_unix_ms: int
    name0: str
    name1: str
    n_runs: int
    reserved: bytes
    runs: list[tuple[int, float, float, int, float, float, int]]
    players: bytes


def read_bpr(path: Path) -> Bpr:
    data = path.read_bytes()
    h = list(_HEADER.unpack_from(data, 0))
    h[13], h[14] = (x.rstrip(b"\0").decode() for x in h[13:15])
    n_runs = h[15]
    assert len(data) == _HEADER.size + n_runs * _RUN.size + _PLAYERS, path
    runs = [_RUN.unpack_from(data, _HEADER.size + i * _RUN.size) for i in range(n_runs)]
    return Bpr(*h, runs, data[-_PLAYERS:])


def replay(sim_lib: Any, r: Bpr) -> tuple[int, bytes, int, int]:
    """(state hash, players, phase, winner) after stepping the recorded inputs."""
    sim = sim_lib.bp_sim_create()
    try:
        sim_lib.bp_sim_reset(sim, r.seed, r.match_id)
        inp = (BpInput * 2)()
        for count, sx0, sy0, b0, sx1, sy1, b1 in r.runs:
            inp[0] = BpInput(sx0, sy0, b0)
            inp[1] = BpInput(sx1, sy1, b1)
            for _ in range(count):
                sim_lib.bp_sim_step(sim, inp)
        players = (P.NetPlayer * 2)()
        sim_lib.bp_sim_players(sim, players)
        return (sim_lib.bp_sim_state_hash(sim), bytes(players), sim_lib.bp_sim_phase(sim),
                sim_lib.bp_sim_winner(sim))
    finally:
        sim_lib.bp_sim_destroy(sim)


def assert_replays(sim_lib: Any, r: Bpr) -> None:
    h, players, phase, winner = replay(sim_lib, r)
    assert sum(run[0] for run in r.runs) == r.n_ticks and len(r.runs) == r.n_runs
    assert h == r.final_hash, "replayed state differs from the recorded final_hash"
    assert players == r.players
    assert (phase == C.BP_PHASE_OVER) == bool(r.complete) and winner == r.winner


def bprs(d: Path) -> list[Path]:
    return sorted(d.glob("*.bpr"), key=lambda p: p.stat().st_mtime_ns)


def until(c: RawClient, done: Any, what: str, timeout: float = 5.0) -> Any:
    """The first snapshot ``c`` receives for which ``done(snapshot)`` holds; fails naming
    ``what`` after ``timeout`` seconds instead of spinning forever."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = c.snapshot()
        if done(s):
            return s
    raise AssertionError(f"no snapshot with {what} within {timeout} s")


def wait_files(d: Path, n: int, timeout: float = 5.0) -> list[Path]:
    """The ``.bpr`` files of ``d`` once there are ``n`` (the server writes them as matches
    end, asynchronously to its answers); fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while len(files := bprs(d)) < n and time.monotonic() < deadline:
        time.sleep(0.02)
    return files


def play(c: RawClient, steps: int, rng: random.Random, tick: int = 0, seq: int = 1) -> Any:
    """Random lockstep commands vs the CPU for ``steps`` steps (or until over)."""
    s = None
    for _ in range(steps):
        c.cmd(tick, seq, rng.uniform(-1.5, 1.5), rng.uniform(-1, 1), rng.randrange(16), rep=4)
        # past the join's snapshot, still queued
        s = until(c, lambda s, t=tick: s.tick > t or s.over, f"a tick past {tick}")
        tick, seq = s.tick, seq + 1
        if s.over:
            break
    return s


def test_a_complete_match_is_recorded_and_replays_bit_for_bit(server_factory, sim_lib, tmp_path):
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", cpu_level=3, seed=77, extra_args=["--record", str(rec)])
    c = RawClient(srv.address)
    c.send(P.pack_ident(0, c.session, "alpha"))
    t0_ms = time.time() * 1000
    last = play(c, 5000, random.Random(1))
    assert last.over
    deadline = time.monotonic() + 5
    while not bprs(rec) and time.monotonic() < deadline:
        time.sleep(0.02)
    (path,) = bprs(rec)
    r = read_bpr(path)
    assert path.name == f"{r.start_unix_ms}-a{c.arena_id}-m{c.match_id}.bpr"
    assert (r.magic, r.version, r.header_size) == (b"BPRP", C.BP_REPLAY_VERSION, 128)
    assert struct.unpack("<I", r.magic)[0] == C.BP_REPLAY_MAGIC
    assert (r.seed, r.match_id, r.arena_id, r.mode) == (77, 1, c.arena_id, C.BP_MODE_LOCKSTEP)
    assert (r.cpu_level, r.complete, r.winner) == (3, 1, last.winner)
    assert r.n_ticks == last.tick and (r.name0, r.name1) == ("alpha", "cpu:3")
    assert r.reserved == bytes(16) and abs(r.start_unix_ms - t0_ms) < 60_000
    assert r.players == last.raw[28:92]
    assert 1 < r.n_runs < r.n_ticks  # run-length: each command covers 4 ticks
    assert_replays(sim_lib, r)
    assert not list(rec.glob(".*.tmp"))
    assert srv.stats()["replays_written"] == 1


def test_cut_short_matches_are_recorded_incomplete(server_factory, sim_lib, tmp_path):
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", extra_args=["--record", str(rec)])
    c0 = RawClient(srv.address, want_slot=0, arena_op=C.BP_ARENA_CREATE, cpu_level=2)
    rng = random.Random(5)
    s = play(c0, 40, rng)
    c0.reset(9)  # RESET mid-match: match 1 is cut short
    until(c0, lambda s: s.match_id == 2, "match 2")
    c0.reset(10)  # match 2 never ticked: no file
    until(c0, lambda s: s.match_id == 3, "match 3")
    s3 = play(c0, 25, rng)
    c0.send(P.pack_bye(0, c0.session))  # the last client leaves: match 3 cut short, arena reclaimed
    files = wait_files(rec, 2)
    recs = {read_bpr(p).match_id: read_bpr(p) for p in files}
    assert sorted(recs) == [1, 3], [p.name for p in files]
    assert recs[1].n_ticks == s.tick == 160 and recs[3].n_ticks == s3.tick == 100
    assert recs[1].seed != 9 and recs[3].seed == 10
    for r in recs.values():
        assert r.complete == 0 and r.winner == C.BP_WINNER_NONE and r.cpu_level == 2
        assert r.name1 == "cpu:2" and r.name0 == ""
        assert_replays(sim_lib, r)
    assert srv.stats()["replays_written"] == 2


def test_a_slot_emptied_mid_match_writes_it_and_shutdown_too(server_factory, sim_lib, tmp_path):
    """Two clients; one leaves mid-match (recorded, cut short), another takes the slot
    and the match goes on (the same file, rewritten with the later ticks); the server
    stops mid-match (written once more)."""
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", extra_args=["--record", str(rec)])
    c0 = RawClient(srv.address, want_slot=0, arena_op=C.BP_ARENA_CREATE, cpu_level=0)
    c1 = RawClient(srv.address, want_slot=1, arena_op=C.BP_ARENA_JOIN, arena_id=c0.arena_id)
    c0.send(P.pack_ident(0, c0.session, "alpha"))
    c1.send(P.pack_ident(0, c1.session, "beta"))
    tick = 0
    for seq in range(1, 11):
        c0.cmd(tick, seq, 1.0, 0.0, 0)
        c1.cmd(tick, seq, -1.0, 0.0, 2)
        tick = until(c0, lambda s, t=tick: s.tick > t, f"a tick past {tick}").tick
    c1.send(P.pack_bye(0, c1.session))
    (path,) = wait_files(rec, 1)
    r = read_bpr(path)
    assert (r.n_ticks, r.complete, r.name0, r.name1) == (40, 0, "alpha", "beta")
    assert_replays(sim_lib, r)
    c2 = RawClient(srv.address, want_slot=1, nonce=5, arena_op=C.BP_ARENA_JOIN,
                   arena_id=c0.arena_id)
    c2.send(P.pack_ident(0, c2.session, "gamma"))
    for seq in range(11, 16):
        c0.cmd(tick, seq, 0.5, 1.0, 1)
        c2.cmd(tick, seq - 10, 0.0, -1.0, 8)
        tick = until(c0, lambda s, t=tick: s.tick > t, f"a tick past {tick}").tick
    srv.close()  # SIGTERM: the running match is written on the way out
    (path2,) = bprs(rec)
    r = read_bpr(path2)
    assert path2 == path and (r.n_ticks, r.complete, r.name1) == (60, 0, "gamma")
    assert_replays(sim_lib, r)


def test_a_failed_write_is_counted_not_fatal(server_factory, tmp_path):
    rec = tmp_path / "rec"
    srv = server_factory(mode="lockstep", cpu_level=1, extra_args=["--record", str(rec)])
    rec.rmdir()  # the directory vanishes under the server
    c = RawClient(srv.address)
    play(c, 10, random.Random(3))
    c.reset(4)
    until(c, lambda s: s.match_id == 2, "match 2")
    stats = srv.stats()
    assert stats["replays_failed"] == 1 and stats["replays_written"] == 0
    assert "recording of match 1 failed" in srv.log_tail()
    play(c, 3, random.Random(4))  # still serving


def test_record_dir_must_be_usable(server_bin, tmp_path):
    import subprocess

    f = tmp_path / "file"
    f.write_text("")
    r = subprocess.run([str(server_bin), "--port", "0", "--record", str(f)], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 2 and "--record" in r.stderr
