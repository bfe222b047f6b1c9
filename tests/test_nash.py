"""The maximin solver behind ``league harden --mixture nash`` (brawlkit/league/nash.py):
games with known answers, and the rounding of its shares to a mixture blob's slots."""

from __future__ import annotations

import numpy as np
import pytest

from brawlkit.league.nash import maximin, slots


def test_rock_paper_scissors_is_uniform_and_worth_half() -> None:
    eq = maximin(np.array([[0.5, 0.0, 1.0], [1.0, 0.5, 0.0], [0.0, 1.0, 0.5]]))
    assert eq.weights == pytest.approx([1 / 3] * 3, abs=0.01)
    assert eq.low == pytest.approx(0.5, abs=0.01) and eq.gap < 0.01


def test_a_two_by_two_game_has_its_textbook_mixture() -> None:
    # rows: p * 0.9 + (1 - p) * 0.2 = p * 0.1 + (1 - p) * 0.8  ->  p = 3/7, value 0.5
    eq = maximin(np.array([[0.9, 0.1], [0.2, 0.8]]))
    assert eq.weights[0] == pytest.approx(3 / 7, abs=0.01)
    assert eq.low == pytest.approx(0.5, abs=0.01) and eq.high == pytest.approx(0.5, abs=0.01)


def test_the_row_no_exploiter_beats_takes_everything() -> None:
    # seed 2's focused rounds (league_144_focus): only the last target resisted them all
    score = np.array([[0.3, 0.2, 0.6, 0.85], [0.75, 0.35, 0.6, 0.95],
                      [0.95, 0.8, 0.65, 0.95], [0.95, 0.95, 1.0, 0.95]])
    eq = maximin(score)
    assert eq.weights[3] > 0.95 and eq.low == pytest.approx(0.95, abs=0.01)
    assert slots(eq.weights, 16) == [0, 0, 0, 16]


def test_slots_round_by_largest_remainder_and_sum_to_k() -> None:
    assert slots(np.array([0.5, 0.3, 0.2]), 16) == [8, 5, 3]
    assert slots(np.array([1.0, 1.0, 1.0]), 16) == [6, 5, 5]
    assert slots(np.array([0.999, 0.001]), 16) == [16, 0]
    with pytest.raises(ValueError, match="non-negative weights"):
        slots(np.array([-0.1, 1.1]), 16)


def test_bad_matrices_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="non-empty 2-D"):
        maximin(np.zeros((0, 3)))
    with pytest.raises(ValueError, match=r"scores in \[0, 1\]"):
        maximin(np.array([[0.5, 1.5]]))
    with pytest.raises(ValueError, match=r"scores in \[0, 1\]"):
        maximin(np.array([[0.5, np.nan]]))
