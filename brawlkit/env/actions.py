"""The action: what the policy outputs and what the game receives (docs/observation.md "Action").

``Box(-1, 1, (6,))`` = stick_x, stick_y, jump, attack, special, shield.  Decoding
to the wire's (stick_x, stick_y, buttons) lives here once;
``bp_action_decode`` in ``native/src/policy.c`` is its C twin (tested against it).
The button bits are the header's ``BP_BTN_*`` constants, never literals.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from brawlkit.wire.constants import C

ACT_DIM: int = int(C.BP_ACT_DIM)
#: names of the action dimensions, in order
ACTION_NAMES: tuple[str, ...] = ("stick_x", "stick_y", "jump", "attack", "special", "shield")
#: wire bit of each button dimension (ACTION_NAMES[2:]), from the header
BUTTON_BITS: tuple[int, ...] = (
    int(C.BP_BTN_JUMP), int(C.BP_BTN_ATTACK), int(C.BP_BTN_SPECIAL), int(C.BP_BTN_SHIELD))
assert len(ACTION_NAMES) == ACT_DIM and len(BUTTON_BITS) == ACT_DIM - 2
_B0, _B1, _B2, _B3 = BUTTON_BITS

Decoded = tuple[float, float, int]
NEUTRAL: Decoded = (0.0, 0.0, 0)


def decode_action(a: Sequence[float] | np.ndarray) -> Decoded:
    """Action vector -> (stick_x, stick_y, buttons) as sent in a ``UserCmd``.

    stick = clip(a[0..1], -1, 1) in float32 (NaN -> 0.0); the button of a[2+i]
    (``BUTTON_BITS[i]``) is pressed iff a[2+i] > 0 (NaN -> not pressed).
    """
    # Widen the float32 values to Python floats once (exact), then decide in
    # plain Python: this runs every env step, where numpy scalar ops cost ~10 us.
    v = np.asarray(a, dtype=np.float32).reshape(-1).tolist()
    if len(v) < ACT_DIM:
        raise ValueError(f"action needs {ACT_DIM} values, got {len(v)}")
    sx, sy = v[0], v[1]
    # clip of a float32 value to [-1, 1] is again a float32 value: no re-rounding;
    # NaN (x != x) -> 0.0
    sx = 0.0 if sx != sx else (-1.0 if sx < -1.0 else (1.0 if sx > 1.0 else sx))
    sy = 0.0 if sy != sy else (-1.0 if sy < -1.0 else (1.0 if sy > 1.0 else sy))
    buttons = ((_B0 if v[2] > 0.0 else 0) | (_B1 if v[3] > 0.0 else 0)
               | (_B2 if v[4] > 0.0 else 0) | (_B3 if v[5] > 0.0 else 0))
    return sx, sy, buttons


# ----------------------------------------------------------------- action patterns
#: stick dead zone used only for *classifying* actions into patterns
PATTERN_STICK_DEADZONE = 0.3
#: 3 stick_x zones x 3 stick_y zones x 16 button combinations
N_PATTERNS = 3 * 3 * 16


def action_patterns(actions: np.ndarray) -> np.ndarray:
    """Discretise actions (N, 6) into pattern ids 0..N_PATTERNS-1.

    Pattern = (stick_x in {-,0,+}, stick_y in {-,0,+}, the four buttons):
    what the game can tell apart, ignoring analog detail.
    """
    a = np.asarray(actions, dtype=np.float32).reshape(-1, ACT_DIM)
    sx = np.digitize(a[:, 0], (-PATTERN_STICK_DEADZONE, PATTERN_STICK_DEADZONE))
    sy = np.digitize(a[:, 1], (-PATTERN_STICK_DEADZONE, PATTERN_STICK_DEADZONE))
    bits = (a[:, 2:] > 0).astype(np.int64) @ (1 << np.arange(ACT_DIM - 2))
    return (sx * 3 + sy) * 16 + bits


def spam_fraction(pattern_counts: np.ndarray | dict[int, int]) -> float:
    """Share of an episode spent on its single most-used action pattern."""
    vals = np.fromiter(pattern_counts.values(), float) if isinstance(pattern_counts, dict) \
        else np.asarray(pattern_counts, float)
    total = vals.sum()
    return float(vals.max() / total) if total > 0 else 0.0
