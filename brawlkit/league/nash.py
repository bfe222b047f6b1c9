"""The least exploitable mixture of a population: the maximin strategy of a zero-sum
matrix game, and its rounding to a mixture blob's whole slots.

Why here: a league's Mains are not ordered by robustness.  On seed 2 of
``league_144_verify_long`` the fresh exploiters of its hardened Mains beat generations 16,
20 and 27–39 of Main 0.66–1.00 and generation 8 (already 1.00 against cpu:8) at most 0.17, while
fresh exploiters of generation 8 beat it 0.97 and 0.98: each has holes the other lacks
(``docs/data/bench_exploit/league_144_harden_s2/history_probe.json``).  Which of Main's
checkpoints to ship, and in what shares,
is then the restricted game PSRO solves (Lanctot et al. 2017): rows are the candidate
Mains, columns the exploiters found so far, an entry Main's score against that exploiter
on fresh matches (draws half), and the mixture that ships maximises its worst column.

The solver is the exponential-weights (Hedge) self-play of the two players with averaged
strategies (Freund & Schapire 1999): the averages converge to a Nash equilibrium of a
zero-sum game at rate O(sqrt(log n / T)), and the value is bracketed by the averages'
own best responses, so a caller sees how close it is (``gap``).  Plain numpy: an exact
LP would need scipy, which the toolkit does not install, for matrices of at most a few
dozen rows and columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Maximin:
    """The row player's maximin mixture of a payoff matrix (rows maximise)."""

    weights: np.ndarray  # over rows, sums to 1
    columns: np.ndarray  # the column player's equilibrium mixture, sums to 1
    low: float  # what ``weights`` guarantees: its worst column
    high: float  # what the column mixture concedes at most: the best row against it

    @property
    def gap(self) -> float:
        """``high - low``: how far from the game's value either average may be."""
        return self.high - self.low


def maximin(payoff: np.ndarray, iters: int = 20_000) -> Maximin:
    """The maximin mixture over the rows of ``payoff`` (entries in [0, 1], rows maximise),
    by ``iters`` rounds of Hedge self-play.  ``ValueError`` for an empty matrix, a
    non-finite entry or one outside [0, 1]."""
    a = np.asarray(payoff, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"payoff must be a non-empty 2-D matrix, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or a.min() < 0.0 or a.max() > 1.0:
        raise ValueError("payoff entries must be finite scores in [0, 1]")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    n, m = a.shape
    # the learning rate that bounds each player's average regret by sqrt(2 ln k / T)
    eta_r = math.sqrt(8.0 * math.log(max(n, 2)) / iters)
    eta_c = math.sqrt(8.0 * math.log(max(m, 2)) / iters)
    lr = np.zeros(n)  # cumulative payoffs (log-weights up to the rate)
    lc = np.zeros(m)
    sum_r = np.zeros(n)
    sum_c = np.zeros(m)
    for _ in range(iters):
        x = np.exp(eta_r * (lr - lr.max()))
        x /= x.sum()
        y = np.exp(-eta_c * (lc - lc.min()))
        y /= y.sum()
        sum_r += x
        sum_c += y
        lr += a @ y  # each row's payoff against the columns' current mixture
        lc += x @ a  # each column's loss against the rows' current mixture
    xbar, ybar = sum_r / iters, sum_c / iters
    return Maximin(weights=xbar, columns=ybar, low=float((xbar @ a).min()),
                   high=float((a @ ybar).max()))


def slots(weights: np.ndarray, k: int) -> list[int]:
    """``weights`` as ``k`` whole slots (largest remainder): how many times each row
    appears in a mixture blob of ``k`` components, whose pick is uniform over slots.
    A row whose share rounds to nothing gets none; the counts sum to ``k``."""
    w = np.asarray(weights, dtype=np.float64)
    if k < 1 or w.ndim != 1 or w.size < 1 or w.min() < 0.0 or w.sum() <= 0.0:
        raise ValueError(f"slots: need k >= 1 and non-negative weights, got k={k}, {w}")
    exact = w / w.sum() * k
    counts = np.floor(exact).astype(int)
    order = np.argsort(-(exact - counts), kind="stable")
    for i in order[: k - int(counts.sum())]:
        counts[i] += 1
    return [int(c) for c in counts]
