"""The three league roles as opponent samplers (AlphaStar's league, docs/league.md).

Each role is an :class:`~brawlkit.league.curriculum.OpponentSampler`: the trainer
asks it for an opponent at every episode start and records every result in the
role's own :class:`~brawlkit.league.pfsp.Payoff` (in this process, fed by all of
its envs, never shared with the other roles).  The pool they draw from is
refreshed after every registration (:meth:`LeagueSampler.refresh`).

* :class:`MainSampler` — ``pfsp_share`` PFSP-squared over every frozen member
  (permanent members included), ``exploiter_share`` against main exploiters it
  struggles with (win rate below ``struggle``), the rest self-play against Main's
  newest checkpoint, falling back to PFSP-variance over Main's history while it
  wins less than ``selfplay_floor`` there.  Missing branches fall through to the
  next (no exploiters yet → self-play; no Main checkpoint yet → PFSP over the pool).
* :class:`MainExploiterSampler` — Main's newest checkpoint while it beats it at
  least ``threshold`` of the time, else PFSP-variance over Main's history (toward
  checkpoints it can beat) until it climbs back.  Reset every K generations (the
  trainer re-initialises the weights; :meth:`wants_reset`).
* :class:`LeagueExploiterSampler` — PFSP (linear-capped) over the whole pool; reset
  with probability ``reset_p`` at each registration.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.league.curriculum import OpponentSampler
from brawlkit.league.opponents import BaselinePolicy, FrozenOpponent
from brawlkit.league.pfsp import Payoff, pfsp_choice
from brawlkit.league.records import BASELINE_ID, Member

Opponent = Any  # "cpu:L" or a callable with a .label


class LeagueSampler(OpponentSampler):
    """What the three roles share: the pool, the payoff, turning ids into opponents."""

    role = ""

    def __init__(self, league_dir: str | Path, env_layout: int, action_repeat: int,
                 seed: int = 0, payoff_decay: float = 0.99) -> None:
        self.league_dir = Path(league_dir)
        self.env_layout = env_layout
        self.action_repeat = action_repeat
        self.rng = np.random.default_rng(seed)
        self.payoff = Payoff(decay=payoff_decay)
        self.members: list[Member] = []
        self._cache: dict[str, Opponent] = {}
        self.last_branch = ""
        self.branch_counts: dict[str, int] = {}

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

    def opponent(self, member_id: str) -> Opponent:
        """The env's opponent for a member id (cached: one numpy policy per member)."""
        if member_id.startswith("cpu:"):
            return member_id
        if member_id not in self._cache:
            if member_id == BASELINE_ID:
                self._cache[member_id] = BaselinePolicy()
            else:
                m = next(x for x in self.members if x.id == member_id)
                self._cache[member_id] = FrozenOpponent(m, self.league_dir, self.env_layout)
        return self._cache[member_id]

    def _pick(self, branch: str, candidates: Sequence[str], weighting: str) -> str:
        self.last_branch = branch
        self.branch_counts[branch] = self.branch_counts.get(branch, 0) + 1
        return pfsp_choice(self.rng, self.payoff, candidates, weighting)

    # ---------------------------------------------------------------- the hook
    def sample(self) -> Opponent:
        return self.opponent(self.choose())

    def choose(self) -> str:
        """The next opponent's member id."""
        raise NotImplementedError

    def record(self, opponent: str, outcome: str) -> None:
        self.payoff.record(opponent, outcome)

    def wants_reset(self, generation: int) -> bool:
        """Should the trainer re-initialise the weights after registering ``generation``?"""
        return False

    def stats(self) -> dict[str, float]:
        total = max(sum(self.branch_counts.values()), 1)
        out = {f"branch/{k}": v / total for k, v in self.branch_counts.items()}
        out["pool_size"] = float(len(self.members))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.role, "payoff": self.payoff.state_dict(),
                "rng": self.rng.bit_generator.state, "branch_counts": dict(self.branch_counts)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("payoff"), dict):
            self.payoff.load_state_dict(state["payoff"])
        if "rng" in state:
            self.rng.bit_generator.state = state["rng"]


class MainSampler(LeagueSampler):
    role = "main"

    def __init__(self, *args: Any, pfsp_share: float = 0.5, exploiter_share: float = 0.15,
                 struggle: float = 0.3, selfplay_floor: float = 0.3, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if not 0 <= pfsp_share <= 1 or not 0 <= exploiter_share <= 1 - pfsp_share:
            raise ValueError("main's shares must satisfy 0 <= pfsp, 0 <= exploiters, pfsp + exploiters <= 1")
        self.pfsp_share, self.exploiter_share = pfsp_share, exploiter_share
        self.struggle, self.selfplay_floor = struggle, selfplay_floor

    def choose(self) -> str:
        r = self.rng.random()
        if r < self.pfsp_share:
            return self._pick("pfsp", self.ids(), "squared")
        if r < self.pfsp_share + self.exploiter_share:
            hard = [x for x in self.ids("main_exploiter") if self.payoff.win_rate(x) < self.struggle]
            if hard:
                return self._pick("exploiters", hard, "squared")
        return self._selfplay()

    def _selfplay(self) -> str:
        history = self.ids("main")
        if not history:
            return self._pick("pfsp", self.ids(), "squared")
        newest = history[-1]
        if self.payoff.win_rate(newest) >= self.selfplay_floor:
            self.last_branch = "selfplay"
            self.branch_counts["selfplay"] = self.branch_counts.get("selfplay", 0) + 1
            return newest
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
            self.last_branch = "main"
            self.branch_counts["main"] = self.branch_counts.get("main", 0) + 1
            return newest
        return self._pick("main_history", mains, "variance")

    def wants_reset(self, generation: int) -> bool:
        return (generation + 1) % self.reset_every == 0


class LeagueExploiterSampler(LeagueSampler):
    role = "league_exploiter"

    def __init__(self, *args: Any, reset_p: float = 0.25, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if not 0 <= reset_p <= 1:
            raise ValueError(f"reset_p must be in [0, 1], got {reset_p}")
        self.reset_p = reset_p

    def choose(self) -> str:
        return self._pick("pfsp", self.ids(), "linear_capped")

    def wants_reset(self, generation: int) -> bool:
        return bool(self.rng.random() < self.reset_p)


SAMPLERS: dict[str, type[LeagueSampler]] = {
    "main": MainSampler, "main_exploiter": MainExploiterSampler,
    "league_exploiter": LeagueExploiterSampler,
}
