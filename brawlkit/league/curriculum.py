"""Opponent sampling: who the trainee plays next, learned from how it did.

The trainer asks an :class:`OpponentSampler` for an opponent at every episode
start and reports every finished episode back.  Today's sampler is the
:class:`CpuCurriculum` over the built-in CPU levels; the league's samplers
(PFSP over the pool of frozen checkpoints) implement the same interface.

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


class CpuCurriculum(OpponentSampler):
    """Curriculum over the built-in CPU levels.

    Args:
        levels: the CPU levels in order of difficulty (default 1..8).
        k: unlock window — level L+1 unlocks when the trainee has won at least
            ``unlock_win_rate`` of its last ``k`` games (draws count as not won)
            at the highest unlocked level L.  Also the window of the win rate p
            used for sampling.
        floor: minimum sampling weight, so a mastered (p≈1) or hopeless (p≈0)
            level still gets games (p(1−p) peaks at 0.25).
        start: how many levels are unlocked at the start (default 1).
    """

    def __init__(
        self, levels: Sequence[int] = tuple(range(1, 9)), k: int = 20, floor: float = 0.05,
        unlock_win_rate: float = 0.5, start: int = 1, seed: int | None = None,
    ) -> None:
        self.levels = [int(x) for x in levels]
        self.k = int(k)
        self.floor = float(floor)
        self.unlock_win_rate = float(unlock_win_rate)
        self.unlocked = max(1, min(int(start), len(self.levels)))
        self.rng = np.random.default_rng(seed)
        self.recent: dict[str, deque[int]] = {self.name(lv): deque(maxlen=self.k) for lv in self.levels}
        self.totals: dict[str, dict[str, int]] = {
            self.name(lv): {"win": 0, "draw": 0, "loss": 0} for lv in self.levels}

    @staticmethod
    def name(level: int) -> str:
        return f"cpu:{level}"

    def win_rate(self, opponent: str) -> float:
        """Recent win rate p (last k games); no games counts as 0.5."""
        h = self.recent.get(opponent)
        return float(np.mean(h)) if h else 0.5

    def weights(self) -> dict[str, float]:
        names = [self.name(lv) for lv in self.levels[: self.unlocked]]
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
        top = self.name(self.levels[self.unlocked - 1])
        h = self.recent[top]
        if (opponent == top and self.unlocked < len(self.levels) and len(h) >= self.k
                and sum(h) >= self.unlock_win_rate * self.k):
            self.unlocked += 1

    @property
    def max_level(self) -> int:
        return self.levels[self.unlocked - 1]

    def stats(self) -> dict[str, float]:
        out: dict[str, float] = {"max_level": float(self.max_level)}
        for lv in self.levels[: self.unlocked]:
            out[f"win_rate/cpu_{lv}"] = self.win_rate(self.name(lv))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "cpu_curriculum", "levels": self.levels, "k": self.k, "floor": self.floor,
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
