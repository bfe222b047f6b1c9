"""The Python observation builder (docs/observation.md): values, bounds, tie rules."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brawlkit.env.observation import (
    OBS_DIM,
    OBS_NAMES,
    POSTURES,
    USED_CONSTANTS,
    build_observation,
    build_observation_from_players,
    build_observation_values,
    commander_posture,
    posture_of,
)
from brawlkit.tools.parity import P, snapshot_bytes
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import ProtocolError, parse_snapshot


def obs(p0: P, p1: P, t: int = 3000, slot: int = 0) -> np.ndarray:
    return build_observation(snapshot_bytes(p0, p1, t), slot)


def test_constants_are_float32_exact() -> None:
    """So C's (double)BP_X and Python's float(C.BP_X) are the same double."""
    for name in USED_CONSTANTS:
        v = float(getattr(C, name))
        assert struct.unpack("<f", struct.pack("<f", v))[0] == v, name
        assert v != 0.0, name


def test_shape_names_dtype() -> None:
    o = obs(P(x=-40.0), P(x=40.0, facing=-1))
    assert o.shape == (OBS_DIM,) == (31,) and o.dtype == np.float32
    assert len(OBS_NAMES) == 31 and len(POSTURES) == C.BP_POSTURE_COUNT


def test_known_values() -> None:
    p0 = P(x=-56.0, y=20.0, vx=3.0, vy=-12.0, damage=150.0, shield=30.0, stocks=2, facing=1)
    p1 = P(x=56.0, y=0.0, vx=-3.0, vy=0.0, damage=450.0, shield=90.0, stocks=3, facing=-1)
    o = obs(p0, p1, t=9000).astype(np.float64)
    f = np.float32
    assert o[0] == f(-56.0 / C.BP_OBS_POS_X_SCALE) and o[1] == f(20.0 / C.BP_OBS_POS_Y_SCALE)
    assert o[2] == f(3.0 / C.BP_OBS_VEL_SCALE) and o[3] == -1.0  # clipped
    assert o[4] == f(150.0 / C.BP_OBS_DAMAGE_SCALE) and o[12] == 1.0  # clipped at 1
    assert o[5] == f(2 / C.BP_STOCKS) and o[13] == 1.0
    assert o[6] == 0.5 and o[14] == 1.0
    assert o[7] == 1.0 and o[15] == -1.0
    assert o[16:21].sum() == 1.0 and o[17] == 1.0  # other at 450% -> aggressive
    assert o[21] == f(112.0 / C.BP_OBS_DIST_SCALE) and o[22] == f(-20.0 / C.BP_OBS_DIST_SCALE)
    d = math.sqrt(112.0**2 + 20.0**2)
    assert o[23] == f(d / C.BP_OBS_DIST_SCALE)
    closing = -((-6.0) * 112.0 + 12.0 * -20.0) / d
    assert o[24] == f(min(1.0, closing / C.BP_OBS_CLOSING_SCALE))
    # self falls at 12/tick from y=20 -> bottom blast in (20 - BOTTOM)/12 ticks
    t_self = (20.0 - C.BP_BLAST_BOTTOM) / 12.0
    assert o[25] == f(t_self / C.BP_OBS_BLAST_HORIZON_TICKS)
    t_other = (-C.BP_BLAST_X - 56.0) / -3.0
    assert o[26] == f(min(t_other, C.BP_OBS_BLAST_HORIZON_TICKS) / C.BP_OBS_BLAST_HORIZON_TICKS)
    assert o[27] == 1.0 and o[28] == 1.0  # facing each other
    assert o[29] == -1.0  # (150 - 450) / 300 clipped
    assert o[30] == f(-1 / C.BP_STOCKS)


def test_layout_3_is_layout_2_and_the_share_of_the_match_left() -> None:
    """The clock (docs/observation.md, layout 3): ticks_left / BP_MATCH_TICKS, clipped."""
    from brawlkit.env.observation import INPUT_NAMES, build_input

    p0, p1 = P(x=-40.0, damage=30.0), P(x=40.0, facing=-1)
    for t, want in ((C.BP_MATCH_TICKS, 1.0), (0, 0.0), (C.BP_MATCH_TICKS // 2, 0.5),
                    (1800, np.float32(1800 / C.BP_MATCH_TICKS)), (C.BP_MATCH_TICKS + 500, 1.0)):
        pkt = snapshot_bytes(p0, p1, t)
        three, two = build_input(pkt, 0, 3, (0.5, -1.0, 3)), build_input(pkt, 0, 2, (0.5, -1.0, 3))
        assert three.shape == (80,) and three[79] == want, t
        np.testing.assert_array_equal(three[:79], two)
    assert INPUT_NAMES[3][-1] == "clock" and INPUT_NAMES[3][:79] == INPUT_NAMES[2]


def test_slot_symmetry() -> None:
    pkt = snapshot_bytes(P(x=-30.0, vx=1.0, damage=40.0, stocks=2),
                         P(x=60.0, y=30.0, vy=-2.0, damage=10.0, facing=-1), 1000)
    a, b = build_observation(pkt, 0), build_observation(pkt, 1)
    assert np.array_equal(a[0:8], b[8:16]) and np.array_equal(a[8:16], b[0:8])
    assert np.array_equal(a[21:23], -b[21:23]) and a[23] == b[23] and a[24] == b[24]
    assert a[25] == b[26] and a[26] == b[25] and a[27] == b[28] and a[28] == b[27]
    assert a[29] == -b[29] and a[30] == -b[30]


def test_zero_distance_and_tie_rules() -> None:
    o = obs(P(x=10.0, y=5.0, vx=3.0, facing=-1), P(x=10.0, y=5.0, vx=-3.0, facing=1))
    assert o[21] == 0.0 and o[22] == 0.0 and o[23] == 0.0
    assert o[24] == 0.0  # zero distance: closing velocity defined as 0
    assert o[27] == 1.0 and o[28] == 1.0  # dx == 0: facing toward, whichever way
    o = obs(P(x=0.0, facing=0), P(x=5.0, facing=0))  # a 0 facing byte counts as right
    assert o[7] == 1.0 and o[15] == 1.0 and o[27] == 1.0 and o[28] == -1.0


def test_time_to_blast() -> None:
    h = C.BP_OBS_BLAST_HORIZON_TICKS
    assert obs(P(), P(x=5.0))[25] == 1.0  # standing still: no danger
    assert obs(P(x=C.BP_BLAST_X), P())[25] == 0.0  # on the bound: already gone
    assert obs(P(y=C.BP_BLAST_TOP + 5.0), P())[25] == 0.0
    o = obs(P(x=200.0, vx=-2.0, vy=0.0), P())
    assert o[25] == np.float32(min(h, (-C.BP_BLAST_X - 200.0) / -2.0) / h)
    o = obs(P(x=200.0, vx=2.0), P())
    assert o[25] == np.float32(((C.BP_BLAST_X - 200.0) / 2.0) / h)


def test_accepts_snapshot_and_rejects_bad_input() -> None:
    pkt = snapshot_bytes(P(), P(x=5.0), 10)
    assert np.array_equal(build_observation(parse_snapshot(pkt), 1), build_observation(pkt, 1))
    with pytest.raises(ValueError):
        build_observation(pkt, 2)
    with pytest.raises(ProtocolError):
        build_observation(pkt[:-1], 0)
    with pytest.raises(ProtocolError):
        build_observation(snapshot_bytes(P(x=math.nan), P(), 10), 0)


def test_values_and_from_players_agree() -> None:
    s = parse_snapshot(snapshot_bytes(P(x=-3.0, damage=120.0), P(x=9.0, y=4.0), 500))
    vals = build_observation_values(s.players[0], s.players[1], s.ticks_left)
    assert len(vals) == 31 and all(isinstance(v, float) for v in vals)
    assert np.array_equal(np.array(vals, dtype=np.float32),
                          build_observation_from_players(s.players[0], s.players[1], 500))
    assert posture_of(s.players[0], s.players[1], 500) == int(np.argmax(vals[16:21]))


finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
player = st.builds(P, x=finite32, y=finite32, vx=finite32, vy=finite32, damage=finite32,
                   shield=finite32, stocks=st.integers(0, 255), facing=st.integers(-128, 127),
                   flags=st.integers(0, 255))


@settings(max_examples=300, deadline=None)
@given(player, player, st.integers(0, 2**32 - 1), st.integers(0, 1))
def test_bounds_for_any_finite_state(p0: P, p1: P, t: int, slot: int) -> None:
    o = obs(p0, p1, t, slot)
    assert np.all(np.isfinite(o))
    assert np.all(o >= -1.0) and np.all(o <= 1.0)
    nonneg = [4, 5, 6, 12, 13, 14, 23, 25, 26, *range(16, 21)]
    assert np.all(o[nonneg] >= 0.0)
    assert sorted(o[16:21].tolist()) == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert set(o[[7, 15, 27, 28]].tolist()) <= {-1.0, 1.0}


def test_commander_is_the_compiled_prn() -> None:
    from brawlkit.parena_compiler import load_stdlib_function

    assert commander_posture is load_stdlib_function("brawlpit/commander_mod.prn",
                                                     "commander_posture")
