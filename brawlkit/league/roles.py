"""The three league roles as opponent samplers (AlphaStar's league, docs/league.md).

Each role is an :class:`~brawlkit.league.curriculum.OpponentSampler`: the trainer
asks it for an opponent at every episode start and records every result in the
role's own :class:`~brawlkit.league.pfsp.Payoff` (in this process, fed by all of
its envs, never shared with the other roles).  The pool they draw from is
refreshed after every registration (:meth:`LeagueSampler.refresh`).

* :class:`MainSampler` — draws the *kind* of opponent first, then one of that kind, so
  a kind keeps its share however many members the pool holds (~100 of Main's own
  checkpoints would otherwise crowd out the 9 fixed opponents, as PFSP weighs members,
  not kinds): ``fixed_share`` against the fixed opponents (the CPU ladder and the
  scripted baseline), drawn by the p(1 − p) ladder curriculum
  (:class:`~brawlkit.league.curriculum.LadderCurriculum`, the CPU curriculum's rule);
  ``pfsp_share`` PFSP-squared over the learned members (``pfsp_window`` > 0: only each
  role's newest ``pfsp_window``; ``pfsp_pool="all"`` puts the fixed opponents in that
  pool too, as before kinds existed); ``exploiter_share`` against main exploiters it
  struggles with (win rate below ``struggle``); the rest self-play against Main's
  newest checkpoint, falling back to PFSP-variance over Main's history while it wins
  less than ``selfplay_floor`` there.  A kind with nobody in it falls through: no
  learned member yet → the fixed opponents; no struggling exploiter → self-play; no
  Main checkpoint yet → the fixed opponents.
* :class:`MainExploiterSampler` — Main's newest checkpoint while it beats it at
  least ``threshold`` of the time, else PFSP-variance over Main's history (toward
  checkpoints it can beat) until it climbs back.  Reset every K generations (the
  trainer re-initialises the weights; :meth:`wants_reset`).
* :class:`LeagueExploiterSampler` — PFSP (linear-capped) over the whole pool (or,
  with ``fixed_share`` > 0, that share against the fixed ladder first); reset with
  probability ``reset_p`` at each registration.

The fixed ladder, weakest first, is the CPU levels with the scripted baseline placed
where its measured strength puts it (:data:`FIXED_LADDER`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.league.curriculum import LadderCurriculum, OpponentSampler
from brawlkit.league.opponents import BaselinePolicy, FrozenOpponent
from brawlkit.league.pfsp import Payoff, pfsp_choice
from brawlkit.league.records import BASELINE_ID, Member
from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

Opponent = Any  # "cpu:L" or a callable with a .label

#: the fixed opponents, weakest first: the CPU levels, the scripted baseline between
#: cpu:6 and cpu:7 (its Bradley-Terry strength in the README's 117-generation league:
#: cpu:6 1910 < baseline 2140 < cpu:7 2300)
FIXED_LADDER: tuple[str, ...] = (*(CpuLevel(lv).spec for lv in CPU_LEVELS if lv <= 6),
                                 BASELINE_ID,
                                 *(CpuLevel(lv).spec for lv in CPU_LEVELS if lv > 6))
#: Main's kinds of opponent, in the order its draw tries them (docs/league.md)
MAIN_KINDS = ("fixed", "pfsp", "exploiters", "selfplay")


class LeagueSampler(OpponentSampler):
    """What the three roles share: the pool, the payoff, turning ids into opponents."""

    role = ""

    def __init__(self, league_dir: str | Path, env_layout: int, action_repeat: int,
                 seed: int = 0, payoff_decay: float = 0.99, ladder_k: int = 10,
                 ladder_floor: float = 0.05) -> None:
        self.league_dir = Path(league_dir)
        self.env_layout = env_layout
        self.action_repeat = action_repeat
        self.rng = np.random.default_rng(seed)
        self.payoff = Payoff(decay=payoff_decay)
        self.members: list[Member] = []
        self._cache: dict[str, Opponent] = {}
        self.last_branch = ""
        self.branch_counts: dict[str, int] = {}
        # the fixed opponents' curriculum: its own record window and generator, so
        # drawing from it never moves the role's own draws
        self.ladder = LadderCurriculum(FIXED_LADDER, k=ladder_k, floor=ladder_floor,
                                       seed=seed + 1)

    # ---------------------------------------------------------------- the pool
    def refresh(self, members: Sequence[Member]) -> None:
        """The pool as it is now: every member a trainee of this action repeat can meet."""
        self.members = [m for m in members if self._playable(m)]

    def _playable(self, m: Member) -> bool:
        if m.permanent:
            return True
        return m.blob is not None and int(m.settings.get("action_repeat", 4)) == self.action_repeat

    def ids(self, role: str | None = None) -> list[str]:
        """Member ids (of ``role``), oldest first."""
        return [m.id for m in self.members if role is None or m.role == role]

    def learned(self, window: int = 0) -> list[str]:
        """The trained members' ids, oldest first; ``window`` > 0: each role's newest
        ``window`` only (ML-Agents' window of past selves)."""
        by_role: dict[str, list[str]] = {}
        for m in self.members:
            if not m.permanent:
                by_role.setdefault(m.role, []).append(m.id)
        keep = {i for ids in by_role.values() for i in (ids[-window:] if window > 0 else ids)}
        return [m.id for m in self.members if m.id in keep]

    def opponent(self, member_id: str) -> Opponent:
        """The env's opponent for a member id (cached: one numpy policy per member)."""
        if CpuLevel.is_spec(member_id):
            return member_id
        if member_id not in self._cache:
            if member_id == BASELINE_ID:
                self._cache[member_id] = BaselinePolicy()
            else:
                m = next(x for x in self.members if x.id == member_id)
                self._cache[member_id] = FrozenOpponent(m, self.league_dir, self.env_layout)
        return self._cache[member_id]

    def _pick(self, branch: str, candidates: Sequence[str], weighting: str) -> str:
        return self._take(branch, pfsp_choice(self.rng, self.payoff, candidates, weighting))

    def _take(self, branch: str, member_id: str) -> str:
        """``member_id``, drawn by ``branch``: counted, so the realised mixture is logged."""
        self.last_branch = branch
        self.branch_counts[branch] = self.branch_counts.get(branch, 0) + 1
        return member_id

    def _fixed(self) -> str:
        """One of the fixed opponents, by the ladder curriculum's p(1 − p) draw."""
        return self._take("fixed", self.ladder.sample())

    # ---------------------------------------------------------------- the hook
    def sample(self) -> Opponent:
        return self.opponent(self.choose())

    def choose(self) -> str:
        """The next opponent's member id."""
        raise NotImplementedError

    def record(self, opponent: str, outcome: str) -> None:
        self.payoff.record(opponent, outcome)
        self.ladder.record(opponent, outcome)  # ignores anything off the ladder

    def wants_reset(self, generation: int) -> bool:
        """Should the trainer re-initialise the weights after registering ``generation``?"""
        return False

    def stats(self) -> dict[str, float]:
        total = max(sum(self.branch_counts.values()), 1)
        out = {f"branch/{k}": v / total for k, v in self.branch_counts.items()}
        out["pool_size"] = float(len(self.members))
        out["fixed_unlocked"] = float(self.ladder.unlocked)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.role, "payoff": self.payoff.state_dict(),
                "rng": self.rng.bit_generator.state, "branch_counts": dict(self.branch_counts),
                "ladder": self.ladder.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("payoff"), dict):
            self.payoff.load_state_dict(state["payoff"])
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]
        if isinstance(state.get("ladder"), dict):
            self.ladder.load_state_dict(state["ladder"])


class MainSampler(LeagueSampler):
    role = "main"

    def __init__(self, *args: Any, fixed_share: float = 0.0, pfsp_share: float = 0.5,
                 exploiter_share: float = 0.15, struggle: float = 0.3,
                 selfplay_floor: float = 0.3, pfsp_window: int = 0, pfsp_pool: str = "all",
                 **kw: Any) -> None:
        super().__init__(*args, **kw)
        shares = (fixed_share, pfsp_share, exploiter_share)
        if any(not 0 <= s <= 1 for s in shares) or sum(shares) > 1:
            raise ValueError(f"main's shares (fixed {fixed_share}, pfsp {pfsp_share}, exploiters "
                             f"{exploiter_share}) must each be in [0, 1] and sum to <= 1 (the "
                             "rest is self-play)")
        if pfsp_pool not in ("learned", "all"):
            raise ValueError(f"pfsp_pool must be 'learned' or 'all', got {pfsp_pool!r}")
        self.fixed_share, self.pfsp_share, self.exploiter_share = shares
        self.struggle, self.selfplay_floor = struggle, selfplay_floor
        self.pfsp_window, self.pfsp_pool = pfsp_window, pfsp_pool

    def choose(self) -> str:
        r = self.rng.random()
        if r < self.fixed_share:
            return self._fixed()
        r -= self.fixed_share
        if r < self.pfsp_share:
            pool = self.learned(self.pfsp_window)
            if self.pfsp_pool == "all":
                pool = [m.id for m in self.members if m.permanent] + pool
            return self._pick("pfsp", pool, "squared") if pool else self._fixed()
        if r < self.pfsp_share + self.exploiter_share:
            hard = [x for x in self.ids("main_exploiter") if self.payoff.win_rate(x) < self.struggle]
            if hard:
                return self._pick("exploiters", hard, "squared")
        return self._selfplay()

    def _selfplay(self) -> str:
        history = self.ids("main")
        if not history:
            return self._fixed() if self.pfsp_pool == "learned" else \
                self._pick("pfsp", self.ids(), "squared")
        newest = history[-1]
        if self.payoff.win_rate(newest) >= self.selfplay_floor:
            return self._take("selfplay", newest)
        return self._pick("selfplay_history", history, "variance")


class MainExploiterSampler(LeagueSampler):
    role = "main_exploiter"

    def __init__(self, *args: Any, threshold: float = 0.2, reset_every: int = 4, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if reset_every < 1:
            raise ValueError(f"reset_every must be >= 1, got {reset_every}")
        self.threshold, self.reset_every = threshold, reset_every

    def choose(self) -> str:
        mains = self.ids("main")
        if not mains:
            return self._pick("pfsp", self.ids(), "variance")
        newest = mains[-1]
        if self.payoff.win_rate(newest) >= self.threshold:
            return self._take("main", newest)
        return self._pick("main_history", mains, "variance")

    def wants_reset(self, generation: int) -> bool:
        return (generation + 1) % self.reset_every == 0


class LeagueExploiterSampler(LeagueSampler):
    role = "league_exploiter"

    def __init__(self, *args: Any, reset_p: float = 0.25, fixed_share: float = 0.0,
                 **kw: Any) -> None:
        super().__init__(*args, **kw)
        if not 0 <= reset_p <= 1 or not 0 <= fixed_share <= 1:
            raise ValueError(f"reset_p and fixed_share must be in [0, 1], got {reset_p}, "
                             f"{fixed_share}")
        self.reset_p, self.fixed_share = reset_p, fixed_share

    def choose(self) -> str:
        if self.fixed_share and self.rng.random() < self.fixed_share:
            return self._fixed()
        return self._pick("pfsp", self.ids(), "linear_capped")

    def wants_reset(self, generation: int) -> bool:
        return bool(self.rng.random() < self.reset_p)


SAMPLERS: dict[str, type[LeagueSampler]] = {
    "main": MainSampler, "main_exploiter": MainExploiterSampler,
    "league_exploiter": LeagueExploiterSampler,
}
