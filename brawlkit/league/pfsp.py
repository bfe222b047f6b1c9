"""Prioritised fictitious self-play: how likely each opponent is, from how the
trainee fares against it.

Follows the weightings of DeepMind's published AlphaStar league pseudocode: with
``p`` the trainee's win rate against an opponent,

* ``squared``       (1 − p)²        — hard opponents first (Main over the pool)
* ``variance``      p (1 − p)       — opponents at the trainee's level
* ``linear``        1 − p
* ``linear_capped`` min(0.5, 1 − p) — everything it does not yet beat, equally

normalised to a distribution; when every weight is 0 (e.g. ``squared`` against a
pool the trainee beats every time) the draw falls back to uniform instead of
dividing by zero (DI-engine's version returns NaN there).  The win rates come from
a :class:`Payoff` record the trainee keeps in its own process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

WEIGHTINGS = ("squared", "variance", "linear", "linear_capped")


def pfsp_weights(win_rates: Sequence[float] | np.ndarray, weighting: str = "squared") -> np.ndarray:
    """Sampling probabilities of opponents with these win rates (sums to 1)."""
    p = np.asarray(win_rates, dtype=np.float64)
    if p.ndim != 1 or len(p) == 0:
        raise ValueError("pfsp needs a non-empty list of win rates")
    if weighting == "squared":
        w = (1.0 - p) ** 2
    elif weighting == "variance":
        w = p * (1.0 - p)
    elif weighting == "linear":
        w = 1.0 - p
    elif weighting == "linear_capped":
        w = np.minimum(0.5, 1.0 - p)
    else:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    total = float(w.sum())
    if not np.isfinite(total) or total <= 0.0:
        return np.full(len(p), 1.0 / len(p))
    return w / total


@dataclass
class Payoff:
    """One trainee's record against each opponent (by member id): decayed wins,
    draws and games (``decay`` per recorded game against that opponent, 0.99 as in
    the pseudocode; 1.0 keeps plain counts).  An opponent never played counts as
    ``p = 0.5``.  Lives in the trainer's process, fed by all of its envs."""

    decay: float = 0.99
    wins: dict[str, float] = field(default_factory=dict)
    draws: dict[str, float] = field(default_factory=dict)
    games: dict[str, float] = field(default_factory=dict)

    def record(self, opponent: str, outcome: str) -> None:
        if outcome not in ("win", "draw", "loss"):
            return
        d = self.decay
        self.wins[opponent] = self.wins.get(opponent, 0.0) * d + (outcome == "win")
        self.draws[opponent] = self.draws.get(opponent, 0.0) * d + (outcome == "draw")
        self.games[opponent] = self.games.get(opponent, 0.0) * d + 1.0

    def win_rate(self, opponent: str) -> float:
        g = self.games.get(opponent, 0.0)
        if g <= 0.0:
            return 0.5
        return (self.wins.get(opponent, 0.0) + 0.5 * self.draws.get(opponent, 0.0)) / g

    def state_dict(self) -> dict[str, object]:
        return {"decay": self.decay, "wins": dict(self.wins), "draws": dict(self.draws),
                "games": dict(self.games)}

    def load_state_dict(self, state: dict[str, object]) -> None:
        for name in ("wins", "draws", "games"):
            table = state.get(name)
            if isinstance(table, dict):
                getattr(self, name).update({str(k): float(v) for k, v in table.items()})


def pfsp_choice(rng: np.random.Generator, win_rate: Callable[[str], float],
                candidates: Sequence[str], weighting: str) -> str:
    """One opponent id drawn from ``candidates`` by :func:`pfsp_weights` of the trainee's
    ``win_rate`` against each (a :meth:`Payoff.win_rate`, or a rule over several)."""
    probs = pfsp_weights([win_rate(c) for c in candidates], weighting)
    return candidates[int(rng.choice(len(candidates), p=probs))]
