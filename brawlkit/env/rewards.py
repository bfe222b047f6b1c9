"""Rewards for BrawlpitEnv: a pluggable object, each tier reported separately.

The env calls ``reward.reset(first_snapshot, slot)`` after every reset and
``reward(prev, cur, slot, ticks_elapsed, action)`` after every step, and puts
each returned tier into ``info`` as ``reward/<tier>`` so plots can show tiers
apart.  ``ticks_elapsed`` is the match clock's advance during the step (under
fastforward several ticks can pass between two steps), so no reward term ever
needs the step count.

Reward objects are stateful (streaks, idle timers): give every env its own
instance — :func:`make_reward` builds a fresh one per call.

Three shapes ship (docs/rewards.md):

* ``outcome``  — :class:`OutcomeReward`, tier 1 only.
* ``tiered``   — :class:`TieredReward`, the five tiers with :class:`TierWeights`
  (the training default).
* ``llm_fighting`` — :class:`LlmFightingReward`, the shape fighting-game LLM
  training commonly uses: the round outcome discounted by a half-life over the
  frames remaining, plus a clamped net-damage return.  For comparing designs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from brawlkit.wire.constants import C
from brawlkit.wire.protocol import Snapshot

MATCH_TICKS = int(C.BP_MATCH_TICKS)
TICK_HZ = int(C.BP_TICK_HZ)

#: the tier names :class:`TieredReward` reports, in docs/rewards.md order
TIERS = ("outcome", "survival", "activity", "time_pressure", "streak")


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


# --------------------------------------------------------------------------- tier 4
def time_pressure_half_life(match_ticks: int = MATCH_TICKS, start_fraction: float = 1 / 3) -> float:
    """Half-life (ticks) such that ``0.5 ** (match_ticks / h) == start_fraction``.

    For the 150 s match and 1/3: 9000 / log2(3) ≈ 5678 ticks ≈ 94.6 s.
    """
    if not 0.0 < start_fraction < 1.0:
        raise ValueError(f"start_fraction must be in (0, 1), got {start_fraction}")
    return match_ticks / math.log2(1.0 / start_fraction)


def time_pressure_multiplier(
    ticks_left: float, match_ticks: int = MATCH_TICKS, start_fraction: float = 1 / 3
) -> float:
    """Hyperbot's time pressure: ``0.5 ** (ticks_left / half_life)``.

    ``start_fraction`` at match start (ticks_left == match_ticks), exactly 1.0
    at the buzzer (ticks_left == 0); ≈ 0.9 with ≈ 14.4 s (864 ticks) left for
    the 150 s match.  ``ticks_left`` is the match clock from the snapshot, never
    a step count.
    """
    t = min(max(float(ticks_left), 0.0), float(match_ticks))
    return 0.5 ** (t / time_pressure_half_life(match_ticks, start_fraction))


# --------------------------------------------------------------------------- tier 5
@lru_cache(maxsize=128)
def fibonacci(n: int) -> int:
    """F(1) = F(2) = 1, F(3) = 2, ...; F(n <= 0) = 0."""
    a, b = 0, 1
    for _ in range(max(n, 0)):
        a, b = b, a + b
    return a


# --------------------------------------------------------------------------- tier 1
@dataclass
class OutcomeReward:
    """Tier 1 only: damage and stock deltas plus the terminal result.

    Why this shape: it is the least-shaped signal that still says what the
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
        return _outcome_terms(
            prev, cur, slot, self.damage_dealt, self.damage_taken, self.stock, self.stock,
            self.win, self.loss, self.draw,
        )

    def __call__(
        self, prev: Snapshot, cur: Snapshot, slot: int, ticks_elapsed: int, action: np.ndarray
    ) -> tuple[float, dict[str, float]]:
        r = self.outcome_terms(prev, cur, slot)
        return r, {"outcome": r}


def _damage_deltas(prev: Snapshot, cur: Snapshot, slot: int) -> tuple[float, float]:
    """(damage dealt, damage taken) in percent during one step.

    Damage resets to 0 on a lost stock: only increases within one life count.
    """
    me0, me1 = prev.players[slot], cur.players[slot]
    op0, op1 = prev.players[1 - slot], cur.players[1 - slot]
    dealt = max(0.0, op1.damage - op0.damage) if op1.stocks == op0.stocks else 0.0
    taken = max(0.0, me1.damage - me0.damage) if me1.stocks == me0.stocks else 0.0
    return dealt, taken


def _outcome_terms(
    prev: Snapshot, cur: Snapshot, slot: int, w_dealt: float, w_taken: float,
    w_stock_taken: float, w_stock_lost: float, w_win: float, w_loss: float, w_draw: float,
) -> float:
    dealt, taken = _damage_deltas(prev, cur, slot)
    r = w_dealt * dealt - w_taken * taken
    r += w_stock_taken * max(0, prev.players[1 - slot].stocks - cur.players[1 - slot].stocks)
    r -= w_stock_lost * max(0, prev.players[slot].stocks - cur.players[slot].stocks)
    res = match_outcome(cur, slot) if not prev.over else None
    if res == "win":
        r += w_win
    elif res == "loss":
        r -= w_loss
    elif res == "draw":
        r -= w_draw
    return r


# --------------------------------------------------------------------------- the five tiers
@dataclass(frozen=True)
class TierWeights:
    """Every weight of :class:`TieredReward`, named and documented.

    Units: damage in percent, time in seconds of *match clock* (60 ticks/s),
    a stock is one stock.  The defaults keep a won match (``win`` plus three
    stocks) an order of magnitude above anything the shaping tiers can pay
    over a whole match, so shaping guides but never replaces winning.
    """

    # -- tier 1: outcome ------------------------------------------------------
    damage_dealt: float = 0.01
    """per percent of damage the opponent takes (a 10 % hit = +0.1)"""
    damage_taken: float = 0.01
    """per percent of damage the trainee takes"""
    stock_taken: float = 1.0
    """per stock the opponent loses"""
    stock_lost: float = 1.0
    """per stock the trainee loses"""
    win: float = 3.0
    """terminal bonus for winning the match"""
    loss: float = 3.0
    """terminal penalty for losing the match"""
    draw: float = 1.0
    """terminal penalty for a draw (a timeout with equal standing)"""

    # -- tier 2: survival -----------------------------------------------------
    on_stage_per_s: float = 0.002
    """paid per second alive and on stage (not offstage, not respawning)"""
    offstage_per_s: float = 0.05
    """charged per second spent offstage (teaches recovery; edgeguard risk)"""

    # -- tier 3: activity -----------------------------------------------------
    idle_per_s: float = 0.03
    """inactivity penalty per second at full time pressure (multiplier 1.0)"""
    idle_grace_s: float = 2.0
    """seconds without dealing damage before stalling is charged"""
    engage_distance: float = 40.0
    """world units: within this distance of the opponent is never stalling"""

    # -- tier 4: time pressure ------------------------------------------------
    time_pressure_start: float = 1 / 3
    """the idle penalty's multiplier at match start; it rises to 1.0 at the
    buzzer along ``0.5 ** (ticks_left / half_life)`` (Hyperbot)"""

    # -- tier 5: survival streak ----------------------------------------------
    streak_interval_s: float = 10.0
    """length of one survived interval, seconds of match clock"""
    streak_unit: float = 0.005
    """bonus for the k-th survived interval of a life = unit * F(min(k, cap))"""
    streak_cap_index: int = 8
    """Fibonacci index the per-interval bonus stops growing at (F(8) = 21)"""

    def replace(self, **overrides: Any) -> TierWeights:
        return replace(self, **overrides)

    def streak_cap_bonus(self) -> float:
        """The largest bonus a single survived interval can ever pay."""
        return self.streak_unit * fibonacci(self.streak_cap_index)

    def streak_max_total(self, match_ticks: int = MATCH_TICKS) -> float:
        """Most streak bonus one whole match can pay (survive-only upper bound)."""
        n = int(match_ticks // max(1, round(self.streak_interval_s * TICK_HZ)))
        return sum(self.streak_unit * fibonacci(min(k, self.streak_cap_index)) for k in range(1, n + 1))


_NOT_ALIVE = (C.BP_AS_DEAD, C.BP_AS_RESPAWN)
_OFFSTAGE = int(C.BP_PLAYER_FLAG_OFFSTAGE)
_OVER = int(C.BP_PHASE_OVER)


class TieredReward:
    """The five reward tiers of docs/rewards.md; every tier's share in the dict.

    * ``outcome``       damage dealt/taken, stocks taken/lost, terminal result.
    * ``survival``      + per second alive on stage, − per second offstage.
    * ``activity``      the idle penalty at its match-start level:
      ``-idle_per_s * time_pressure_start`` per idle second.  Idle means no
      damage dealt for ``idle_grace_s`` seconds *and* farther than
      ``engage_distance`` from the opponent.
    * ``time_pressure`` the extra idle penalty as the clock runs down:
      ``-idle_per_s * (m - time_pressure_start)`` per idle second with
      ``m = time_pressure_multiplier(ticks_left)``, so ``activity +
      time_pressure = -idle_per_s * m``: stalling is cheap early, full price at
      the buzzer.  Reads ``ticks_left`` from the snapshot.
    * ``streak``        ``streak_unit * F(min(k, streak_cap_index))`` for the
      k-th survived ``streak_interval_s`` of the current life; k resets to 0
      on a lost stock.  The cap makes the per-interval bonus constant after the
      cap index, so a survive-only policy earns at most
      :meth:`TierWeights.streak_max_total` per match.
    """

    def __init__(self, weights: TierWeights | None = None, match_ticks: int = MATCH_TICKS):
        self.w = weights or TierWeights()
        self.match_ticks = int(match_ticks)
        self._interval_ticks = max(1, int(round(self.w.streak_interval_s * TICK_HZ)))
        self._grace_ticks = self.w.idle_grace_s * TICK_HZ
        self._life_start = 0
        self._intervals_paid = 0
        self._last_engage = 0

    # match clock in ticks since the start, from the snapshot
    def _clock(self, snap: Snapshot) -> int:
        return self.match_ticks - int(snap.ticks_left)

    def reset(self, first: Snapshot, slot: int) -> None:
        t = self._clock(first)
        self._life_start = t
        self._intervals_paid = 0
        self._last_engage = t

    def state(self) -> tuple[int, int, int]:
        """(life start, intervals paid, last engagement): what the reward remembers between
        steps — handed to its C twin while the fast lane steps the env, and back."""
        return self._life_start, self._intervals_paid, self._last_engage

    def set_state(self, life_start: int, intervals_paid: int, last_engage: int) -> None:
        self._life_start, self._intervals_paid, self._last_engage = (int(life_start),
                                                                     int(intervals_paid),
                                                                     int(last_engage))

    def __call__(
        self, prev: Snapshot, cur: Snapshot, slot: int, ticks_elapsed: int, action: np.ndarray
    ) -> tuple[float, dict[str, float]]:
        # Written out once (no helper calls, each player looked up once): this runs every
        # env step, and the arithmetic is exactly _outcome_terms' / _damage_deltas'.
        w = self.w
        dt_s = max(0, int(ticks_elapsed)) / TICK_HZ
        now = self.match_ticks - int(cur.ticks_left)
        pp, cp = prev.players, cur.players
        me0, me, op0, op = pp[slot], cp[slot], pp[1 - slot], cp[1 - slot]
        cur_over = cur.phase == _OVER

        # tier 1
        dealt = max(0.0, op.damage - op0.damage) if op.stocks == op0.stocks else 0.0
        taken = max(0.0, me.damage - me0.damage) if me.stocks == me0.stocks else 0.0
        outcome = w.damage_dealt * dealt - w.damage_taken * taken
        outcome += w.stock_taken * max(0, op0.stocks - op.stocks)
        outcome -= w.stock_lost * max(0, me0.stocks - me.stocks)
        if cur_over and prev.phase != _OVER:
            res = match_outcome(cur, slot)
            if res == "win":
                outcome += w.win
            elif res == "loss":
                outcome -= w.loss
            elif res == "draw":
                outcome -= w.draw

        # tier 2
        survival = 0.0
        if me.stocks > 0 and me.action_state not in _NOT_ALIVE:
            survival = -w.offstage_per_s * dt_s if me.flags & _OFFSTAGE else w.on_stage_per_s * dt_s

        # tiers 3 + 4
        lost_stock = me.stocks < me0.stocks
        if dealt > 0 or op.stocks < op0.stocks or lost_stock:
            self._last_engage = now
        activity = time_pressure = 0.0
        dx, dy = op.x - me.x, op.y - me.y  # squared: the C twin (native/src/reward.c) compares the same
        if (now - self._last_engage) > self._grace_ticks and not cur_over \
                and dx * dx + dy * dy > w.engage_distance * w.engage_distance:
            m = time_pressure_multiplier(cur.ticks_left, self.match_ticks, w.time_pressure_start)
            activity = -w.idle_per_s * w.time_pressure_start * dt_s
            time_pressure = -w.idle_per_s * (m - w.time_pressure_start) * dt_s

        # tier 5
        streak = 0.0
        if lost_stock:
            self._life_start = now
            self._intervals_paid = 0
        elif me.stocks > 0:
            k = (now - self._life_start) // self._interval_ticks
            while self._intervals_paid < k:
                self._intervals_paid += 1
                streak += w.streak_unit * fibonacci(min(self._intervals_paid, w.streak_cap_index))

        parts = {
            "outcome": outcome,
            "survival": survival,
            "activity": activity,
            "time_pressure": time_pressure,
            "streak": streak,
        }
        return 0.0 + outcome + survival + activity + time_pressure + streak, parts


# --------------------------------------------------------------------------- preset: LLM fighting
@dataclass(frozen=True)
class LlmFightingWeights:
    """The step-wise cousin of the per-move reward of ``/move`` fights
    (``brawlkit/policy_server/move_reward.py``, docs/rewards.md): paid at every step
    for the PPO env instead of computed backward once a fight is over, so the outcome is
    discounted by the clock to the buzzer (over a provisional lead), not by the frames
    to the fight's real end; the damage term is clamped per step, not as a return; and
    there is no invalid-move penalty (an action vector is always a valid input).

    (The shape commonly used for fighting-game LLM / arena training.)

    Two terms:

    * ``outcome`` — the round outcome (+1 win, 0 draw, −1 loss, times
      ``outcome_scale``) discounted by a half-life over the frames remaining
      until the round is decided.  Paid densely as the change of the potential
      ``Φ = lead * outcome_scale * 0.5 ** (frames_remaining / half_life)``,
      where ``lead`` is the provisional result (stocks, then damage) and
      ``frames_remaining`` is the match clock's ticks left (0 once the match is
      over).  The steps telescope: over a match they sum to exactly
      ``outcome_scale * result``, and a lead is worth more the closer the
      buzzer is.
    * ``damage`` — the net damage return ``damage_scale * (dealt − taken)``
      clamped to ``[-damage_clip, damage_clip]`` per step.
    """

    outcome_scale: float = 3.0
    half_life_s: float = 30.0
    """seconds of match clock over which a lead's value halves"""
    damage_scale: float = 0.01
    damage_clip: float = 0.2


class LlmFightingReward:
    """Discounted round outcome + clamped net-damage return (see :class:`LlmFightingWeights`)."""

    def __init__(self, weights: LlmFightingWeights | None = None, match_ticks: int = MATCH_TICKS):
        self.w = weights or LlmFightingWeights()
        self.match_ticks = int(match_ticks)
        self._phi = 0.0

    def _lead(self, snap: Snapshot, slot: int) -> float:
        res = match_outcome(snap, slot)
        if res is not None:
            return {"win": 1.0, "loss": -1.0, "draw": 0.0}[res]
        me, op = snap.players[slot], snap.players[1 - slot]
        if me.stocks != op.stocks:
            return 1.0 if me.stocks > op.stocks else -1.0
        if me.damage != op.damage:
            return 1.0 if me.damage < op.damage else -1.0
        return 0.0

    def _potential(self, snap: Snapshot, slot: int) -> float:
        left = 0 if snap.over else int(snap.ticks_left)
        h = self.w.half_life_s * TICK_HZ
        return self._lead(snap, slot) * self.w.outcome_scale * 0.5 ** (left / h)

    def reset(self, first: Snapshot, slot: int) -> None:
        self._phi = self._potential(first, slot)

    def __call__(
        self, prev: Snapshot, cur: Snapshot, slot: int, ticks_elapsed: int, action: np.ndarray
    ) -> tuple[float, dict[str, float]]:
        phi = self._potential(cur, slot)
        outcome = 0.0 if prev.over else phi - self._phi
        self._phi = phi
        dealt, taken = _damage_deltas(prev, cur, slot)
        c = self.w.damage_clip
        damage = min(c, max(-c, self.w.damage_scale * (dealt - taken)))
        return outcome + damage, {"outcome": outcome, "damage": damage}


# --------------------------------------------------------------------------- presets / factory
REWARD_NAMES = ("tiered", "outcome", "llm_fighting")


def reward_preset(name: str) -> Any:
    """The weights dataclass of a named preset (``tiered``, ``outcome``, ``llm_fighting``)."""
    if name == "tiered":
        return TierWeights()
    if name == "outcome":
        return OutcomeReward()
    if name == "llm_fighting":
        return LlmFightingWeights()
    raise ValueError(f"unknown reward {name!r}; choose one of {', '.join(REWARD_NAMES)}")


def _parse_overrides(spec: str, cls: type) -> dict[str, Any]:
    known = {f.name: f.type for f in fields(cls)}
    out: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        key, sep, val = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise ValueError(f"bad reward override {item!r}; fields: {', '.join(known)}")
        out[key] = int(val) if known[key] in ("int", int) else float(val)
    return out


def make_reward(name: str = "tiered", **overrides: Any) -> RewardFn:
    """A fresh reward object (one per env: rewards keep per-match state).

    ``name`` is a preset name, optionally followed by ``:field=value,...``
    overrides, e.g. ``"tiered:win=5,idle_per_s=0.05"`` (what ``--reward``
    accepts on the CLI).
    """
    base, _, spec = name.partition(":")
    preset = reward_preset(base)
    kw = {**_parse_overrides(spec, type(preset)), **overrides}
    preset = replace(preset, **kw) if kw else preset
    if base == "tiered":
        return TieredReward(preset)
    if base == "llm_fighting":
        return LlmFightingReward(preset)
    return preset  # OutcomeReward is itself the reward object


def reward_config(reward: Any) -> dict[str, Any]:
    """The weights of a reward object as a plain dict (for checkpoint metadata)."""
    w = getattr(reward, "w", reward)
    try:
        return {"class": type(reward).__name__, **asdict(w)}
    except TypeError:
        return {"class": type(reward).__name__}
