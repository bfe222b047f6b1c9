"""The per-move reward of a fight played through ``/move``: the write-up's backward pass.

docs/rewards.md ("The per-move reward") and docs/move_training.md state it; this module
is the one implementation (the trainer, the rollout export and the notebook read it).

Each move of a finished fight gets, walking the fight **backward** from its last move::

    discount      = 0.5 ** (frames / half_life_frames)          # this move's own frames
    outcome       = outcome * discount                          # starts at ±win_bonus / 0
    damage_return = hp_diff / HEALTH_MAX + discount * damage_return
    reward        = outcome + damage_weight * clamp(damage_return, -1, 1)
                    - invalid_penalty * invalid

so the outcome reaches a move discounted by the frames from that move's start to the
moment the fight **actually** ended (not to the buzzer), and the damage term is a
discounted *return* of net damage from that move on, clamped to [−1, 1].

BRAWLPIT has percent and stocks, not a health bar, so the write-up's ``hp_diff`` and
``HEALTH_MAX`` are defined here once:

* ``hp_diff`` of a move = damage dealt − damage taken during its frames, in percent
  (increases within one life, as every reward counts them), plus
  :data:`STOCK_PERCENT` (100) for every stock taken and minus it for every stock lost;
* :data:`HEALTH_MAX` = :data:`STOCK_PERCENT` × ``BP_STOCKS`` = 300: a whole match's
  worth of stocks, the way SF3's health bar is a whole round's worth of health.  The
  damage return thus reaches its clamp at about three stocks' worth of net damage,
  and the invalid-move penalty, 20 / HEALTH_MAX ≈ 0.067, is a fifth of a stock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from brawlkit.env.rewards import _damage_deltas
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import Snapshot

#: percent a stock taken (or lost) counts as in ``hp_diff``
STOCK_PERCENT = 100.0
#: the scale of ``hp_diff``: a whole match's worth of stocks (3 × 100 percent)
HEALTH_MAX = STOCK_PERCENT * int(C.BP_STOCKS)
#: the sign of the outcome from the model's side
OUTCOME_SIGN: dict[str, int] = {"win": 1, "loss": -1, "draw": 0}


@dataclass(frozen=True)
class MoveRewardWeights:
    """The reward's constants, defaulting to the write-up's.

    ``half_life_frames`` 60 × 60 (a minute of game time halves the outcome's value);
    ``damage_weight`` 0.1; ``win_bonus`` 1 (a loss −1, a draw 0); ``invalid_penalty``
    20 / HEALTH_MAX per move that named no available move; ``health_max`` the scale
    of ``hp_diff`` (:data:`HEALTH_MAX`)."""

    half_life_frames: float = 60.0 * 60.0
    damage_weight: float = 0.1
    win_bonus: float = 1.0
    invalid_penalty: float = 20.0 / HEALTH_MAX
    health_max: float = HEALTH_MAX

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def hp_diff(prev: Snapshot, cur: Snapshot, slot: int = 0) -> float:
    """Net damage of the frames from ``prev`` to ``cur`` from ``slot``'s side, in percent:
    dealt − taken, ± :data:`STOCK_PERCENT` per stock taken / lost."""
    dealt, taken = _damage_deltas(prev, cur, slot)
    stocks_taken = max(0, prev.players[1 - slot].stocks - cur.players[1 - slot].stocks)
    stocks_lost = max(0, prev.players[slot].stocks - cur.players[slot].stocks)
    return dealt - taken + STOCK_PERCENT * (stocks_taken - stocks_lost)


def assign_rewards(invalid: Sequence[bool], hp_diffs: Sequence[float], frames: Sequence[int],
                   outcome: str, weights: MoveRewardWeights | None = None) -> list[float]:
    """Every move's reward of one finished fight, by the backward pass of the module doc.

    ``outcome`` is the fight's result from the model's side (``win`` / ``loss`` /
    ``draw``); the three sequences are per move, in playing order.  Why backward: the
    discount of a move is the product of its own and every later move's, i.e. of the
    frames from it to the fight's real end, which one reverse walk computes exactly."""
    w = weights or MoveRewardWeights()
    if not len(invalid) == len(hp_diffs) == len(frames):
        raise ValueError("invalid, hp_diffs and frames must have one entry per move")
    value = w.win_bonus * OUTCOME_SIGN[outcome]
    damage_return = 0.0
    out = [0.0] * len(frames)
    for i in range(len(frames) - 1, -1, -1):
        discount = 0.5 ** (frames[i] / w.half_life_frames)
        value *= discount
        damage_return = hp_diffs[i] / w.health_max + discount * damage_return
        out[i] = (value + w.damage_weight * max(-1.0, min(1.0, damage_return))
                  - w.invalid_penalty * bool(invalid[i]))
    return out
