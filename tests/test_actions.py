"""brawlkit.env.actions: the one decoding of the action vector, with the header's button bits."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brawlkit.env.actions import (
    BUTTON_BITS,
    N_PATTERNS,
    action_patterns,
    decode_action,
    spam_fraction,
)
from brawlkit.wire.constants import C


def test_button_bits_are_the_headers():
    assert BUTTON_BITS == (C.BP_BTN_JUMP, C.BP_BTN_ATTACK, C.BP_BTN_SPECIAL, C.BP_BTN_SHIELD)
    assert sum(BUTTON_BITS) == C.BP_BTN_MASK


def test_decode_action_rule():
    J, A, S, SH = BUTTON_BITS
    assert decode_action([1.5, -2.0, 0.1, 0.0, -0.0, 1e-30]) == (1.0, -1.0, J | SH)
    assert decode_action([np.nan, 0.25, np.nan, 1, 1, -1]) == (0.0, 0.25, A | S)
    assert decode_action(np.zeros(6, np.float32)) == (0.0, 0.0, 0)
    with pytest.raises(ValueError, match="6 values"):
        decode_action([0.0] * 5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=6, max_size=6))
def test_decode_action_property(a):
    sx, sy, b = decode_action(a)
    assert -1.0 <= sx <= 1.0 and -1.0 <= sy <= 1.0
    assert sx == float(np.clip(np.float32(a[0]), -1, 1))
    assert b == sum(bit for bit, v in zip(BUTTON_BITS, a[2:], strict=True) if v > 0)


def test_action_patterns_and_spam():
    acts = np.array([[0, 0, -1, -1, -1, -1], [1, 1, 1, 1, 1, 1], [-1, 0, 1, -1, -1, -1]], np.float32)
    pats = action_patterns(acts)
    assert pats.tolist() == [(1 * 3 + 1) * 16, (2 * 3 + 2) * 16 + 15, (0 * 3 + 1) * 16 + 1]
    assert int(action_patterns(np.ones((1, 6))).max()) < N_PATTERNS
    assert spam_fraction(np.bincount(pats, minlength=N_PATTERNS)) == pytest.approx(1 / 3)
    assert spam_fraction({5: 3, 7: 1}) == 0.75 and spam_fraction(np.zeros(4)) == 0.0
