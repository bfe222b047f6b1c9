"""The 31-value observation (docs/observation.md) — twin of ``native/src/obs.c``.

Both builders take the two ``NetPlayer`` structs of one SNAPSHOT and the match
clock, and produce the same 31 float32 values *bit for bit* (the parity check,
``python -m brawlkit parity`` / ``make check``, holds them to 1e-6 and in
practice finds 0.0).  To make that possible the arithmetic is pinned down here;
``obs.c`` repeats it line by line.  Change one, change the other, in the same
commit.

Arithmetic rules (both languages)
---------------------------------
* Every packet field is widened to double (exact); every value is computed in
  double and rounded to float32 exactly once, at the end (numpy's float32 cast
  and C's ``(float)`` both round to nearest-even).
* Only ``+ - * /``, ``sqrt``, comparisons and negation are used, each in the same
  order in both languages.  No ``pow``/``exp``/``log``, no ``fmin``/``fmax``
  (their NaN rules differ from Python's); clipping is explicit comparisons:
  ``clip(v, lo, hi) = lo if v < lo else (hi if v > hi else v)``.
  Division by a scale is a real division (never a multiplication by a
  precomputed reciprocal, which rounds differently).  C compiles with
  ``-ffp-contract=off`` (no FMA), SSE2 doubles (no x87), no ``-ffast-math``.
* Header constants are read from ``brawlpit.h`` (``brawlkit.constants.C``); the
  C side uses ``(double)BP_*``.  Every constant used here is exactly
  representable in float32 (a test checks), so the ``f`` suffix cannot make the
  two sides differ.
* Non-finite floats never reach the builders: ``parse_snapshot`` and
  ``bp_obs_from_snapshot`` both reject them.

Values (``s`` = self = the controlled slot, ``o`` = the other fighter)
----------------------------------------------------------------------
per fighter, ``p`` in (s, o), 8 values at offsets 0 (self) and 8 (other)::

    +0  clip(x / BP_OBS_POS_X_SCALE, -1, 1)
    +1  clip(y / BP_OBS_POS_Y_SCALE, -1, 1)
    +2  clip(vx / BP_OBS_VEL_SCALE, -1, 1)
    +3  clip(vy / BP_OBS_VEL_SCALE, -1, 1)
    +4  clip(damage / BP_OBS_DAMAGE_SCALE, 0, 1)
    +5  clip(stocks / BP_STOCKS, 0, 1)
    +6  clip(shield / BP_SHIELD_MAX, 0, 1)
    +7  facing sign: -1.0 if facing < 0 else +1.0   (a 0 byte counts as right)

16..20  one-hot of ``commander_posture`` (neutral, aggressive, patient,
        edgeguard, recover), compiled from parena/stdlib/brawlpit/commander_mod.prn;
        its 13 inputs are the raw (un-normalised) doubles
        s.x s.y s.vx s.vy s.damage s.stocks o.x o.y o.vx o.vy o.damage o.stocks
        ticks_left.

with ``dx = o.x - s.x``, ``dy = o.y - s.y``, ``dvx = o.vx - s.vx``,
``dvy = o.vy - s.vy``, ``d = sqrt(dx*dx + dy*dy)``::

    21  clip(dx / BP_OBS_DIST_SCALE, -1, 1)
    22  clip(dy / BP_OBS_DIST_SCALE, -1, 1)
    23  clip(d / BP_OBS_DIST_SCALE, 0, 1)
    24  closing velocity: 0 if d == 0 else
        clip((-(dvx*dx + dvy*dy) / d) / BP_OBS_CLOSING_SCALE, -1, 1)
        (positive = the fighters approach each other)
    25  ttb(s), 26 ttb(o): time to the blast zone by linear extrapolation.
        0.0 if the fighter is not strictly inside the blast box
        (-BP_BLAST_X < x < BP_BLAST_X and BP_BLAST_BOTTOM < y < BP_BLAST_TOP);
        else t = H = BP_OBS_BLAST_HORIZON_TICKS, then
          vx > 0: t = min(t, (BP_BLAST_X - x) / vx)
          vx < 0: t = min(t, (-BP_BLAST_X - x) / vx)
          vy > 0: t = min(t, (BP_BLAST_TOP - y) / vy)
          vy < 0: t = min(t, (BP_BLAST_BOTTOM - y) / vy)
        (min as ``if c < t: t = c``), value t / H, in (0, 1]; 1 = no danger
        within the horizon.  Velocities are stage units per tick.
    27  self facing toward other:  +1 if dx == 0 or (dx > 0) == (s.facing >= 0)
        else -1   (tie dx == 0: +1, "facing toward" whichever way)
    28  other facing toward self:  +1 if dx == 0 or (dx < 0) == (o.facing >= 0)
        else -1
    29  clip((s.damage - o.damage) / BP_OBS_DAMAGE_DIFF_SCALE, -1, 1)
    30  clip((s.stocks - o.stocks) / BP_STOCKS, -1, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from brawlkit.parena_compiler import load_stdlib_module
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import PlayerState, Snapshot, parse_snapshot

OBS_DIM: int = int(C.BP_OBS_DIM)
#: every value is clipped to [-OBS_BOUND, OBS_BOUND]
OBS_BOUND = 1.0
_COMMANDER = load_stdlib_module("brawlpit/commander_mod.prn")  # compiled once per process
#: the ``posture`` labels of commander_mod.prn, in one-hot order (docs/observation.md fixes this order)
POSTURES: tuple[str, ...] = _COMMANDER.label_sets["posture"]
if POSTURES != ("neutral", "aggressive", "patient", "edgeguard", "recover"):
    raise ImportError(f"commander_mod.prn posture labels {POSTURES} differ from docs/observation.md's order")
POSTURE_NEUTRAL, POSTURE_AGGRESSIVE, POSTURE_PATIENT, POSTURE_EDGEGUARD, POSTURE_RECOVER = range(5)
POSTURE_OFFSET: int = int(C.BP_OBS_POSTURE_OFFSET)
assert POSTURE_OFFSET == 16 and len(POSTURES) == C.BP_POSTURE_COUNT  # the append order below

#: names of the 31 dimensions, in order (for tables and plots)
OBS_NAMES: tuple[str, ...] = (
    *(f"self_{n}" for n in ("x", "y", "vx", "vy", "damage", "stocks", "shield", "facing")),
    *(f"other_{n}" for n in ("x", "y", "vx", "vy", "damage", "stocks", "shield", "facing")),
    *(f"posture_{p}" for p in POSTURES),
    "rel_x", "rel_y", "distance", "closing_vel", "self_time_to_blast", "other_time_to_blast",
    "self_facing_other", "other_facing_self", "damage_diff", "stock_diff",
)
assert len(OBS_NAMES) == OBS_DIM

#: every header constant the builder uses, in the order of the names below (the
#: float32-exactness test reads this)
USED_CONSTANTS: tuple[str, ...] = (
    "BP_OBS_POS_X_SCALE", "BP_OBS_POS_Y_SCALE", "BP_OBS_VEL_SCALE", "BP_OBS_DAMAGE_SCALE",
    "BP_STOCKS", "BP_SHIELD_MAX", "BP_OBS_DIST_SCALE", "BP_OBS_CLOSING_SCALE",
    "BP_OBS_BLAST_HORIZON_TICKS", "BP_OBS_DAMAGE_DIFF_SCALE", "BP_BLAST_X", "BP_BLAST_TOP",
    "BP_BLAST_BOTTOM",
)
# ... as Python floats (exactly float32-representable; tested), short names for the builder
(_PX, _PY, _VS, _DS, _ST, _SH, _DIST, _CLOS, _HOR, _DDS, _BX, _BT, _BB) = (
    float(getattr(C, name)) for name in USED_CONSTANTS)

_ONE_HOT: tuple[tuple[float, ...], ...] = tuple(
    tuple(1.0 if i == k else 0.0 for i in range(len(POSTURES))) for k in range(len(POSTURES))
)


commander_posture: Callable[..., int] = _COMMANDER.functions["commander_posture"]
"""commander_posture(self_x, self_y, self_vx, self_vy, self_damage, self_stocks,
other_x, other_y, other_vx, other_vy, other_damage, other_stocks, ticks_left) -> int
(index into :data:`POSTURES`)."""


def posture_of(self_p: PlayerState, other_p: PlayerState, ticks_left: int) -> int:
    """Posture index of ``self_p`` (0 neutral .. 4 recover), see :data:`POSTURES`."""
    return commander_posture(
        self_p.x, self_p.y, self_p.vx, self_p.vy, self_p.damage, float(self_p.stocks),
        other_p.x, other_p.y, other_p.vx, other_p.vy, other_p.damage, float(other_p.stocks),
        float(ticks_left),
    )


def _ttb(x: float, y: float, vx: float, vy: float) -> float:
    """Ticks to the nearest blast line on the current velocity, over the horizon (obs.c's
    ``time_to_blast``, the same comparisons in the same order: the float results are identical)."""
    if not (-_BX < x < _BX and _BB < y < _BT):
        return 0.0
    t = _axis_ttb(x, vx, -_BX, _BX, _HOR)
    return _axis_ttb(y, vy, _BB, _BT, t) / _HOR


def _axis_ttb(pos: float, vel: float, lo: float, hi: float, t: float) -> float:
    """``t``, or the ticks until ``pos`` moving at ``vel`` crosses ``lo``/``hi`` if sooner."""
    if vel > 0.0:
        c = (hi - pos) / vel
        if c < t:
            return c
    elif vel < 0.0:
        c = (lo - pos) / vel
        if c < t:
            return c
    return t


def build_observation_values(
    self_p: PlayerState, other_p: PlayerState, ticks_left: int
) -> list[float]:
    """The 31 observation values as Python floats (doubles, not yet float32)."""
    out: list[float] = []
    ap = out.append
    for p in (self_p, other_p):
        v = p.x / _PX
        ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
        v = p.y / _PY
        ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
        v = p.vx / _VS
        ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
        v = p.vy / _VS
        ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
        v = p.damage / _DS
        ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
        v = p.stocks / _ST
        ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
        v = p.shield / _SH
        ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
        ap(-1.0 if p.facing < 0 else 1.0)

    out.extend(_ONE_HOT[posture_of(self_p, other_p, ticks_left)])

    sx, sy, ox, oy = self_p.x, self_p.y, other_p.x, other_p.y
    dx = ox - sx
    dy = oy - sy
    dvx = other_p.vx - self_p.vx
    dvy = other_p.vy - self_p.vy
    d = math.sqrt(dx * dx + dy * dy)
    v = dx / _DIST
    ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
    v = dy / _DIST
    ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
    v = d / _DIST
    ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
    if d == 0.0:
        ap(0.0)
    else:
        v = (-(dvx * dx + dvy * dy) / d) / _CLOS
        ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
    ap(_ttb(sx, sy, self_p.vx, self_p.vy))
    ap(_ttb(ox, oy, other_p.vx, other_p.vy))
    ap(1.0 if dx == 0.0 or (dx > 0.0) == (self_p.facing >= 0) else -1.0)
    ap(1.0 if dx == 0.0 or (dx < 0.0) == (other_p.facing >= 0) else -1.0)
    v = (self_p.damage - other_p.damage) / _DDS
    ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
    v = (self_p.stocks - other_p.stocks) / _ST
    ap(-1.0 if v < -1.0 else (1.0 if v > 1.0 else v))
    return out


def build_observation_from_players(
    self_p: PlayerState, other_p: PlayerState, ticks_left: int
) -> np.ndarray:
    """31 float32 from already-decoded players (what the env calls each step)."""
    return np.array(build_observation_values(self_p, other_p, ticks_left), dtype=np.float32)


def build_observation(snap: bytes | Snapshot, slot: int) -> np.ndarray:
    """31 float32 (docs/observation.md) from a SNAPSHOT's bytes or a parsed Snapshot, as seen by ``slot``."""
    if slot not in (0, 1):
        raise ValueError(f"slot must be 0 or 1, got {slot!r}")
    if not isinstance(snap, Snapshot):
        snap = parse_snapshot(bytes(snap))
    players = snap.players
    return np.array(
        build_observation_values(players[slot], players[1 - slot], snap.ticks_left),
        dtype=np.float32,
    )


def build_observations(snaps: Sequence[bytes | Snapshot], slots: Sequence[int]) -> np.ndarray:
    """Stack of observations, shape (N, 31) float32 (parity tools, notebooks)."""
    out = np.empty((len(snaps), OBS_DIM), dtype=np.float32)
    for i, (s, slot) in enumerate(zip(snaps, slots, strict=True)):
        out[i] = build_observation(s, slot)
    return out


# ----------------------------------------------------------------- policy input layouts
#: layout 1 = exactly the 31-value observation; layout 2 = the observation, then what a
#: player knows of its own fighter and controller; layout 3 = layout 2, then the match
#: clock (docs/observation.md "Policy input layouts"); native/src/obs.c's bp_input_build
#: is the twin.  A .bpw blob and a checkpoint record which one their network reads.
INPUT_LAYOUT_OBS: int = int(C.BP_INPUT_LAYOUT_OBS)
INPUT_LAYOUT_SELF: int = int(C.BP_INPUT_LAYOUT_SELF)
INPUT_LAYOUT_CLOCK: int = int(C.BP_INPUT_LAYOUT_CLOCK)
INPUT_LAYOUT = INPUT_LAYOUT_SELF
"""the layout training uses by default"""
INPUT_LAYOUTS: dict[int, int] = {INPUT_LAYOUT_OBS: OBS_DIM, INPUT_LAYOUT_SELF: int(C.BP_INPUT_SELF_DIM),
                                 INPUT_LAYOUT_CLOCK: int(C.BP_INPUT_CLOCK_DIM)}
"""known layouts -> their input size"""
INPUT_LAYOUT_WIDEST = INPUT_LAYOUT_CLOCK
"""the layout every other one is the start of: what an env builds whose inputs only its
policy opponents read (each reads its own layout's first values), e.g. ``/move``'s"""

_AS = int(C.BP_AS_COUNT)
_HIT = float(C.BP_INPUT_HITSTUN_SCALE)
_FLAG_BITS = (C.BP_PLAYER_FLAG_ON_GROUND, C.BP_PLAYER_FLAG_SHIELDING, C.BP_PLAYER_FLAG_HITSTUN,
              C.BP_PLAYER_FLAG_ATTACKING, C.BP_PLAYER_FLAG_INVULNERABLE, C.BP_PLAYER_FLAG_OFFSTAGE)
_BUTTONS = (C.BP_BTN_JUMP, C.BP_BTN_ATTACK, C.BP_BTN_SPECIAL, C.BP_BTN_SHIELD)
_STATE_NAMES = ("idle", "walk", "jumpsquat", "air", "attack", "special", "upspecial", "helpless",
                "shield", "shieldstun", "shieldbreak", "hitstun", "ledge", "ledgeclimb", "lag",
                "respawn", "dead")
_STATE_ONE_HOT: tuple[tuple[float, ...], ...] = tuple(
    tuple(1.0 if i == k else 0.0 for i in range(_AS)) for k in range(_AS))
_NO_STATE = (0.0,) * _AS
assert len(_STATE_NAMES) == _AS
assert (C.BP_INPUT_PREV_OFFSET, C.BP_INPUT_FLAGS_OFFSET, C.BP_INPUT_JUMP_OFFSET,
        C.BP_INPUT_HITSTUN_OFFSET, C.BP_INPUT_SELF_STATE_OFFSET, C.BP_INPUT_OTHER_STATE_OFFSET,
        C.BP_INPUT_SELF_DIM) == (OBS_DIM, OBS_DIM + 6, OBS_DIM + 12, OBS_DIM + 13, OBS_DIM + 14,
                                 OBS_DIM + 14 + _AS, OBS_DIM + 14 + 2 * _AS), "the append order below"
assert (C.BP_INPUT_CLOCK_OFFSET, C.BP_INPUT_CLOCK_DIM) == (C.BP_INPUT_SELF_DIM, C.BP_INPUT_SELF_DIM + 1)
_MATCH_TICKS = float(C.BP_MATCH_TICKS)

#: names of each layout's values, in order (tables, plots, the parity check)
INPUT_NAMES: dict[int, tuple[str, ...]] = {
    INPUT_LAYOUT_OBS: OBS_NAMES,
    INPUT_LAYOUT_SELF: (
        *OBS_NAMES,
        "prev_stick_x", "prev_stick_y", "prev_jump", "prev_attack", "prev_special", "prev_shield",
        "self_on_ground", "self_shielding", "self_hitstun", "self_attacking", "self_invulnerable",
        "self_offstage", "self_jumps_left", "self_hitstun_ticks",
        *(f"self_state_{n}" for n in _STATE_NAMES), *(f"other_state_{n}" for n in _STATE_NAMES),
    ),
}
INPUT_NAMES[INPUT_LAYOUT_CLOCK] = (*INPUT_NAMES[INPUT_LAYOUT_SELF], "clock")
assert all(INPUT_NAMES[INPUT_LAYOUT_WIDEST][:n] == INPUT_NAMES[k] for k, n in INPUT_LAYOUTS.items())
assert all(len(INPUT_NAMES[k]) == n for k, n in INPUT_LAYOUTS.items())

Command = tuple[float, float, int]
#: the command before a match's first step (what layouts 2 and 3 start from)
NEUTRAL_COMMAND: Command = (0.0, 0.0, 0)


def check_input_layout(layout: int, what: str = "policy") -> int:
    """The input size of ``layout``, or a ValueError naming the layout ``what`` was trained with."""
    if layout not in INPUT_LAYOUTS:
        raise ValueError(
            f"{what} was trained with policy input layout {layout}; this brawlkit builds "
            f"layout(s) {sorted(INPUT_LAYOUTS)} (docs/observation.md, 'Policy input layouts')")
    return INPUT_LAYOUTS[layout]


def build_input_values(self_p: PlayerState, other_p: PlayerState, ticks_left: int,
                       layout: int, prev: Command = NEUTRAL_COMMAND) -> list[float]:
    """The policy input of ``layout`` as Python floats (doubles, not yet float32).

    ``prev`` is the command this player sent last step, (stick_x, stick_y, buttons)
    as on the wire; layout 1 ignores it.
    """
    out = build_observation_values(self_p, other_p, ticks_left)
    if layout == INPUT_LAYOUT_OBS:
        return out
    if layout != INPUT_LAYOUT_SELF and layout != INPUT_LAYOUT_CLOCK:
        check_input_layout(layout)
    sx, sy, buttons = prev
    if not (math.isfinite(sx) and math.isfinite(sy)):
        raise ValueError(f"previous command has a non-finite stick ({sx}, {sy})")
    ap = out.append
    ap(-1.0 if sx < -1.0 else (1.0 if sx > 1.0 else sx))
    ap(-1.0 if sy < -1.0 else (1.0 if sy > 1.0 else sy))
    out.extend(1.0 if buttons & b else -1.0 for b in _BUTTONS)
    out.extend(1.0 if self_p.flags & f else 0.0 for f in _FLAG_BITS)
    v = float(self_p.jumps_left)
    ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
    v = self_p.hitstun_ticks / _HIT
    ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
    s, o = self_p.action_state, other_p.action_state
    out.extend(_STATE_ONE_HOT[s] if 0 <= s < _AS else _NO_STATE)
    out.extend(_STATE_ONE_HOT[o] if 0 <= o < _AS else _NO_STATE)
    if layout == INPUT_LAYOUT_CLOCK:  # the share of the match left (docs/observation.md)
        v = ticks_left / _MATCH_TICKS
        ap(0.0 if v < 0.0 else (1.0 if v > 1.0 else v))
    return out


def build_input(snap: bytes | Snapshot, slot: int, layout: int,
                prev: Command = NEUTRAL_COMMAND) -> np.ndarray:
    """The policy input of ``layout`` (float32) from a SNAPSHOT's bytes or a parsed Snapshot."""
    if slot not in (0, 1):
        raise ValueError(f"slot must be 0 or 1, got {slot!r}")
    if not isinstance(snap, Snapshot):
        snap = parse_snapshot(bytes(snap))
    players = snap.players
    return np.array(build_input_values(players[slot], players[1 - slot], snap.ticks_left,
                                       layout, prev), dtype=np.float32)
