"""Opponent sampling: who the trainee plays next, learned from how it did.

The trainer asks an :class:`OpponentSampler` for an opponent at every episode
start and reports every finished episode back.  :class:`LadderCurriculum` is the
p(1 − p) draw and unlock rule over an ordered ladder of opponents, shared by the PPO
runs (:class:`CpuCurriculum`, the built-in CPU levels) and the ``/move`` trainer
(``brawlkit/policy_server/trainer.py``); the league's samplers (PFSP over the pool of
frozen checkpoints) implement the same interface, and :class:`SingleOpponent` is the
trivial one: the same opponent every episode (``train --opponent``).

The record of results lives in the trainer's process only, fed by all of its
envs, and travels with every checkpoint (``state_dict``) so ``--resume``
continues where it stopped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel


class OpponentSampler(ABC):
    """The opponent-sampling hook: ``sample()`` picks, ``record()`` learns.

    The trainer calls :meth:`sample` at every episode start (directly, as the
    env's ``opponent_sampler``, or via ``set_next_opponent`` for subprocess
    envs) and :meth:`record` with every finished episode's
    ``info["opponent"]`` and ``info["outcome"]``.  The league adds checkpoint
    opponents by subclassing this (PFSP weights over the pool).
    """

    @abstractmethod
    def sample(self) -> str:
        """The next opponent spec (``"cpu:L"`` today)."""

    @abstractmethod
    def record(self, opponent: str, outcome: str) -> None:
        """Learn from one finished episode (``outcome``: win / draw / loss)."""

    def __call__(self) -> str:  # BrawlpitEnv(opponent_sampler=...) calls it
        return self.sample()

    def stats(self) -> dict[str, float]:
        """Numbers worth logging (``curriculum/<key>``)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint stores so ``--resume`` continues the record (default: nothing)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; a stateless sampler ignores it."""
        del state


class LadderCurriculum(OpponentSampler):
    """A curriculum up an ordered ladder of opponents: the p(1 − p) draw and the unlock rule.

    One implementation for every trainer that climbs a ladder (the PPO runs' CPU levels,
    :class:`CpuCurriculum`; the ``/move`` trainer's CPU levels or any other ladder of
    opponent names, ``brawlkit/policy_server/trainer.py``): the write-up's curriculum,
    where most games are played against opponents the trainee is evenly matched with.

    Args:
        ladder: opponent names in order of difficulty.
        k: unlock window — rung i+1 unlocks when the trainee has won at least
            ``unlock_win_rate`` of its last ``k`` games (draws count as not won)
            at the highest unlocked rung i.  Also the window of the win rate p
            used for sampling.
        floor: minimum sampling weight, so a mastered (p≈1) or hopeless (p≈0)
            rung still gets games (p(1−p) peaks at 0.25).
        start: how many rungs are unlocked at the start (default 1).
    """

    #: ``state_dict()["kind"]``
    kind = "ladder_curriculum"

    def __init__(
        self, ladder: Sequence[str], k: int = 20, floor: float = 0.05,
        unlock_win_rate: float = 0.5, start: int = 1, seed: int | None = None,
    ) -> None:
        self.ladder = [str(x) for x in ladder]
        if not self.ladder or len(set(self.ladder)) != len(self.ladder):
            raise ValueError(f"a ladder is a non-empty list of distinct opponents, got {ladder!r}")
        self.k = int(k)
        self.floor = float(floor)
        self.unlock_win_rate = float(unlock_win_rate)
        self.unlocked = max(1, min(int(start), len(self.ladder)))
        self.rng = np.random.default_rng(seed)
        self.recent: dict[str, deque[int]] = {n: deque(maxlen=self.k) for n in self.ladder}
        self.totals: dict[str, dict[str, int]] = {
            n: {"win": 0, "draw": 0, "loss": 0} for n in self.ladder}

    def win_rate(self, opponent: str) -> float:
        """Recent win rate p (last k games); no games counts as 0.5."""
        h = self.recent.get(opponent)
        return float(np.mean(h)) if h else 0.5

    def weights(self) -> dict[str, float]:
        """The draw's probabilities over the unlocked rungs: ``max(p(1 − p), floor)``,
        normalised."""
        names = self.ladder[: self.unlocked]
        w = np.array([max(p * (1 - p), self.floor) for p in map(self.win_rate, names)])
        return dict(zip(names, (w / w.sum()).tolist(), strict=True))

    def sample(self) -> str:
        w = self.weights()
        names = list(w)
        return names[int(self.rng.choice(len(names), p=list(w.values())))]

    def record(self, opponent: str, outcome: str) -> None:
        if opponent not in self.recent or outcome not in ("win", "draw", "loss"):
            return
        self.recent[opponent].append(1 if outcome == "win" else 0)
        self.totals[opponent][outcome] += 1
        top = self.top
        h = self.recent[top]
        if (opponent == top and self.unlocked < len(self.ladder) and len(h) >= self.k
                and sum(h) >= self.unlock_win_rate * self.k):
            self.unlocked += 1

    @property
    def top(self) -> str:
        """The hardest unlocked rung."""
        return self.ladder[self.unlocked - 1]

    def stats(self) -> dict[str, float]:
        out = self._progress()
        for name in self.ladder[: self.unlocked]:
            out[f"win_rate/{self.stat_key(name)}"] = self.win_rate(name)
        return out

    def _progress(self) -> dict[str, float]:
        """The first entry of :meth:`stats`: how far up the ladder the trainee is."""
        return {"unlocked": float(self.unlocked)}

    def stat_key(self, name: str) -> str:
        """The rung's name in a metric key."""
        return name

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "ladder": self.ladder, "k": self.k, "floor": self.floor,
            "unlock_win_rate": self.unlock_win_rate, "unlocked": self.unlocked,
            "recent": {k: list(v) for k, v in self.recent.items()},
            "totals": self.totals,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.unlocked = int(state.get("unlocked", self.unlocked))
        for k, v in state.get("recent", {}).items():
            if k in self.recent:
                self.recent[k].extend(int(x) for x in v[-self.k:])
        for k, v in state.get("totals", {}).items():
            if k in self.totals:
                self.totals[k].update({o: int(n) for o, n in v.items()})
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]


class CpuCurriculum(LadderCurriculum):
    """:class:`LadderCurriculum` over the built-in CPU levels (``cpu:1`` … ``cpu:8``).

    Args:
        levels: the CPU levels in order of difficulty (default every level the header
            declares, 1..8).  The other arguments are :class:`LadderCurriculum`'s.
    """

    kind = "cpu_curriculum"

    def __init__(
        self, levels: Sequence[int] = CPU_LEVELS, k: int = 20, floor: float = 0.05,
        unlock_win_rate: float = 0.5, start: int = 1, seed: int | None = None,
    ) -> None:
        self.levels = [int(x) for x in levels]
        super().__init__([self.name(lv) for lv in self.levels], k=k, floor=floor,
                         unlock_win_rate=unlock_win_rate, start=start, seed=seed)

    @staticmethod
    def name(level: int) -> str:
        return CpuLevel(level).spec

    @property
    def max_level(self) -> int:
        return self.levels[self.unlocked - 1]

    def _progress(self) -> dict[str, float]:
        return {"max_level": float(self.max_level)}

    def stat_key(self, name: str) -> str:
        return CpuLevel.parse(name).key  # "cpu_3": metric keys read better without ':'

    def state_dict(self) -> dict[str, Any]:
        out = super().state_dict()
        del out["ladder"]
        return {"kind": out.pop("kind"), "levels": self.levels, **out}


class SingleOpponent(OpponentSampler):
    """One opponent for the whole run (``train --opponent``): no curriculum, no pool.

    What a best response is trained against: ``bench exploit`` trains fresh exploiters
    against one frozen policy alone to measure how easily it is beaten.  ``opponent`` is
    what the env plays (a ``"cpu:L"`` spec or a callable with a ``label``:
    :func:`brawlkit.league.opponents.fixed_opponent`); every finished episode against it
    is counted, and the last ``k`` make the logged win rate (``curriculum/win_rate``).
    """

    kind = "single_opponent"

    def __init__(self, opponent: Any, k: int = 100, seed: int = 0) -> None:
        self.opponent = opponent
        self.label = str(getattr(opponent, "label", opponent))
        self.k = int(k)
        self.recent: deque[int] = deque(maxlen=self.k)
        self.totals = {"win": 0, "draw": 0, "loss": 0}
        # a mixture (brawlkit.league.opponents.MixtureOpponent) draws a component per match
        self.rng = np.random.default_rng(seed)

    def sample(self) -> Any:
        draw = getattr(self.opponent, "draw", None)
        return draw(self.rng) if draw is not None else self.opponent

    def record(self, opponent: str, outcome: str) -> None:
        if opponent != self.label or outcome not in self.totals:
            return
        self.recent.append(1 if outcome == "win" else 0)
        self.totals[outcome] += 1

    def stats(self) -> dict[str, float]:
        return {"win_rate": float(np.mean(self.recent)) if self.recent else 0.0,
                "games": float(sum(self.totals.values()))}

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "opponent": self.label, "recent": list(self.recent),
                "totals": dict(self.totals)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("opponent") != self.label:
            return  # another opponent's record says nothing about this one
        self.recent.extend(int(x) for x in state.get("recent", [])[-self.k:])
        self.totals.update({o: int(n) for o, n in state.get("totals", {}).items()
                            if o in self.totals})
