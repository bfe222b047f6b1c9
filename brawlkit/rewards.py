"""Rewards for BrawlpitEnv: a pluggable object, each tier reported separately.

The env calls ``reward.reset(first_snapshot, slot)`` after every reset and
``reward(prev, cur, slot, ticks_elapsed, action)`` after every step, and puts
each returned tier into ``info`` as ``reward/<tier>`` so plots can show tiers
apart.  ``ticks_elapsed`` is the match clock's advance during the step (under
fastforward several ticks can pass between two steps), so no reward term ever
needs the step count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from brawlkit.constants import C
from brawlkit.protocol import Snapshot


class RewardFn(Protocol):
    """What the env needs from a reward: a reset hook and a per-step call."""

    def reset(self, first: Snapshot, slot: int) -> None: ...

    def __call__(
        self, prev: Snapshot, cur: Snapshot, slot: int, ticks_elapsed: int, action: np.ndarray
    ) -> tuple[float, dict[str, float]]: ...


def match_outcome(snap: Snapshot, slot: int) -> str | None:
    """'win' / 'loss' / 'draw' from ``slot``'s side once the match is over, else None."""
    if not snap.over:
        return None
    if snap.winner == C.BP_WINNER_DRAW:
        return "draw"
    if snap.winner == slot:
        return "win"
    if snap.winner == 1 - slot:
        return "loss"
    return None


@dataclass
class OutcomeReward:
    """Tier 1 only: damage and stock deltas plus the terminal result.

    Why this default: it is the least-shaped signal that still says what the
    game is about; the tiered reward adds survival, activity, time pressure
    and a capped survival streak on top.

    Damage is scaled per 100 % and a stock is worth ``stock`` so one stock
    outweighs a typical combo; the terminal term settles who won.
    """

    damage_dealt: float = 0.01
    damage_taken: float = 0.01
    stock: float = 1.0
    win: float = 3.0
    loss: float = 3.0
    draw: float = 1.0

    def reset(self, first: Snapshot, slot: int) -> None:
        pass

    def outcome_terms(self, prev: Snapshot, cur: Snapshot, slot: int) -> float:
        me0, me1 = prev.players[slot], cur.players[slot]
        op0, op1 = prev.players[1 - slot], cur.players[1 - slot]
        r = 0.0
        # Damage resets to 0 on a lost stock: only count increases.
        r += self.damage_dealt * max(0.0, op1.damage - op0.damage) if op1.stocks == op0.stocks else 0.0
        r -= self.damage_taken * max(0.0, me1.damage - me0.damage) if me1.stocks == me0.stocks else 0.0
        r += self.stock * (op0.stocks - op1.stocks)
        r -= self.stock * (me0.stocks - me1.stocks)
        res = match_outcome(cur, slot) if not prev.over else None
        if res == "win":
            r += self.win
        elif res == "loss":
            r -= self.loss
        elif res == "draw":
            r -= self.draw
        return r

    def __call__(
        self, prev: Snapshot, cur: Snapshot, slot: int, ticks_elapsed: int, action: np.ndarray
    ) -> tuple[float, dict[str, float]]:
        r = self.outcome_terms(prev, cur, slot)
        return r, {"outcome": r}
