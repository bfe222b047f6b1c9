"""The C simulation and CPU in-process (libbrawlpit.so through brawlkit.wire.sim):
replay determinism, the snapshot layout, matches ending properly, the CPU ladder."""

from __future__ import annotations

import ctypes as ct
import random

import pytest

from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.sim import BpInput


def snapshot(lib, sim, seq=0, ack=0, n_players=2, mode=C.BP_MODE_LOCKSTEP) -> bytes:
    buf = ct.create_string_buffer(P.SNAPSHOT_SIZE)
    assert lib.bp_sim_snapshot(sim, seq, n_players, mode, ack, buf, P.SNAPSHOT_SIZE) == P.SNAPSHOT_SIZE
    return buf.raw


def random_stream(n, seed):
    rng = random.Random(seed)
    btn = (0, C.BP_BTN_JUMP, C.BP_BTN_ATTACK, C.BP_BTN_SPECIAL, C.BP_BTN_SHIELD,
           C.BP_BTN_JUMP | C.BP_BTN_ATTACK, C.BP_BTN_JUMP | C.BP_BTN_SPECIAL, 0, 0)
    return [(rng.uniform(-1, 1), rng.uniform(-1, 1), rng.choice(btn)) for _ in range(n)]


@pytest.fixture
def lib(sim_lib):
    return sim_lib


def test_replay_determinism(lib):
    stream = random_stream(1500, 1)
    sims = [lib.bp_sim_create(), lib.bp_sim_create()]
    try:
        for s in sims:
            lib.bp_sim_reset(s, 2024, 3)
        for a, b in zip(stream, reversed(stream), strict=True):
            arr = (BpInput * 2)(BpInput(*a), BpInput(*b))
            for s in sims:
                for _ in range(4):
                    lib.bp_sim_step(s, arr)
            assert snapshot(lib, sims[0]) == snapshot(lib, sims[1])
        assert lib.bp_sim_state_hash(sims[0]) == lib.bp_sim_state_hash(sims[1])
        lib.bp_sim_reset(sims[1], 2025, 3)
        lib.bp_sim_reset(sims[0], 2024, 3)
        assert snapshot(lib, sims[0]) != snapshot(lib, sims[1])  # the seed matters
    finally:
        for s in sims:
            lib.bp_sim_destroy(s)


def test_snapshot_layout(lib):
    s = lib.bp_sim_create()
    lib.bp_sim_reset(s, 1, 9)
    snap = P.parse_snapshot(snapshot(lib, s, seq=77, ack=5, n_players=2, mode=C.BP_MODE_FASTFORWARD))
    assert (snap.seq, snap.tick) == (77, 0)
    assert (snap.match_id, snap.ticks_left, snap.phase, snap.winner, snap.n_players, snap.mode,
            snap.ack_cmd_seq) == (9, C.BP_MATCH_TICKS, C.BP_PHASE_PLAYING, C.BP_WINNER_NONE, 2,
                                  C.BP_MODE_FASTFORWARD, 5)
    p0, p1 = snap.players
    assert p0.stocks == C.BP_STOCKS and p0.facing == 1 and p1.facing == -1
    assert (p0.slot, p1.slot) == (0, 1)
    lib.bp_sim_destroy(s)


def test_neutral_match_times_out_as_draw(lib):
    s = lib.bp_sim_create()
    lib.bp_sim_reset(s, 4, 1)
    n = lib.bp_sim_step_cpu(s, None, None, 20000)
    assert n == C.BP_MATCH_TICKS and lib.bp_sim_phase(s) == C.BP_PHASE_OVER
    assert lib.bp_sim_winner(s) == C.BP_WINNER_DRAW and lib.bp_sim_ticks_left(s) == 0
    arr = (BpInput * 2)()
    lib.bp_sim_step(s, arr)  # no-op once over
    assert lib.bp_sim_tick(s) == C.BP_MATCH_TICKS
    lib.bp_sim_destroy(s)


def test_cpu_match_ends_with_a_winner(lib):
    s = lib.bp_sim_create()
    cpu = lib.bp_cpu_create(4, 11)
    assert lib.bp_cpu_create(0, 1) is None and lib.bp_cpu_create(9, 1) is None
    lib.bp_sim_reset(s, 8, 1)
    idle = BpInput(0.0, 0.0, 0)
    total = 0
    while lib.bp_sim_phase(s) == C.BP_PHASE_PLAYING:
        total += lib.bp_sim_step_cpu(s, ct.byref(idle), cpu, 600)
    assert total == lib.bp_sim_tick(s) < C.BP_MATCH_TICKS  # the CPU takes 3 stocks off an idle player
    assert lib.bp_sim_winner(s) == 1
    assert P.parse_snapshot(snapshot(lib, s)).players[0].stocks == 0
    lib.bp_cpu_destroy(cpu)
    lib.bp_sim_destroy(s)
    w = [lib.bp_match_cpu_vs_cpu(3, 5, seed) for seed in range(4)]
    assert all(x in (0, 1, 2) for x in w)
    assert w == [lib.bp_match_cpu_vs_cpu(3, 5, seed) for seed in range(4)]


def test_cpu_ladder_monotonic(lib):
    """Each level beats the one below in a clear majority of 50 slot-balanced
    matches (the full table is `python -m brawlkit cputable`)."""
    games = 50
    for lv in range(1, 8):
        score = 0.0
        for g in range(games):
            seed = 5000 + 31 * lv + g
            if g % 2 == 0:
                w = lib.bp_match_cpu_vs_cpu(lv + 1, lv, seed)
                score += 1.0 if w == 0 else (0.5 if w == 2 else 0.0)
            else:
                w = lib.bp_match_cpu_vs_cpu(lv, lv + 1, seed)
                score += 1.0 if w == 1 else (0.5 if w == 2 else 0.0)
        assert score / games >= 0.6, f"L{lv + 1} vs L{lv}: {score}/{games}"
