"""The league roles' opponent samplers (AlphaStar's league, docs/league.md).

Each role is declared once in :mod:`brawlkit.league.role_specs` (its sampler class
here, its options with their defaults and checks, its reset rule, its colour); a
sampler takes its options from that declaration (:class:`LeagueSampler`), so a sampler
built in a test and one a run builds from TrainConfig's flags start from the same
defaults.

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
  struggles with (win rate below ``struggle``: in its own training games, or, with
  ``verify_matches`` > 0, in the matches its deterministic policy played them after its
  newest generation, :meth:`MainSampler.verification`); the rest self-play against Main's
  newest checkpoint, falling back to PFSP-variance over Main's history while it wins
  less than ``selfplay_floor`` there.  With ``patch_share`` > 0, while it struggles with
  any main exploiter that share of its games goes to those exploiters before the mixture
  is drawn (branch ``patch``): the mixture's exploiter share alone did not patch a hole
  that a focused run patches quickly (off by default: patching the league's exploiters
  did not keep a fresh one from beating the final Main, README).  A kind with nobody in it falls through: no
  learned member yet → the fixed opponents; no struggling exploiter → self-play; no
  Main checkpoint yet → the fixed opponents.
* :class:`MainExploiterSampler` — Main's newest checkpoint (``target="held"``: the one
  that was newest when its lineage started, until its next reset) while it beats it at
  least ``threshold`` of the time, else PFSP-variance over Main's history up to it
  (toward checkpoints it can beat) until it climbs back.  Reset every ``reset_every``
  generations (the trainer re-initialises the weights; :meth:`wants_reset`).
* :class:`LeagueExploiterSampler` — PFSP (linear-capped) over the whole pool (or,
  with ``fixed_share`` > 0, that share against the fixed ladder first); reset with
  probability ``reset_p`` at each registration.

The fixed ladder, weakest first, is the CPU levels with the scripted baseline placed
where its measured strength puts it (:data:`FIXED_LADDER`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.league.curriculum import LadderCurriculum, OpponentSampler
from brawlkit.league.opponents import BaselinePolicy, FrozenOpponent
from brawlkit.league.pfsp import Payoff, pfsp_choice
from brawlkit.league.records import BASELINE_ID, Member
from brawlkit.league.role_specs import ROLE_SPECS, RoleSpec
from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

Opponent = Any  # "cpu:L" or a callable with a .label

#: the fixed opponents, weakest first: the CPU levels, the scripted baseline between
#: cpu:6 and cpu:7 (its Bradley-Terry strength in the README's 117-generation league:
#: cpu:6 1910 < baseline 2140 < cpu:7 2300)
FIXED_LADDER: tuple[str, ...] = (*(CpuLevel(lv).spec for lv in CPU_LEVELS if lv <= 6),
                                 BASELINE_ID,
                                 *(CpuLevel(lv).spec for lv in CPU_LEVELS if lv > 6))


class LeagueSampler(OpponentSampler):
    """What the three roles share: the pool, the payoff, turning ids into opponents."""

    #: the role this class samples for unless told (its declaration in
    #: :data:`~brawlkit.league.role_specs.ROLE_SPECS`)
    role = ""

    def __init__(self, league_dir: str | Path, env_layout: int, action_repeat: int,
                 seed: int = 0, payoff_decay: float = 0.99, ladder_k: int = 10,
                 ladder_floor: float = 0.05, spec: RoleSpec | None = None,
                 **options: Any) -> None:
        # the role's options: the declaration's defaults and checks, never the class's own
        # (one declaration: TrainConfig's flags and a sampler built here agree)
        # (a bare LeagueSampler, no role: only the pool and its id -> opponent resolution,
        # as a Ray env worker uses it)
        self.spec = spec if spec is not None else ROLE_SPECS.get(self.role)
        if self.spec is None and options:
            raise ValueError(f"options {sorted(options)} need a role (a RoleSpec)")
        self.role = self.spec.name if self.spec is not None else ""
        self.options = self.spec.resolve(options) if self.spec is not None else {}
        for name, value in self.options.items():
            setattr(self, name, value)
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

    def _pick(self, branch: str, candidates: Sequence[str], weighting: str,
              win_rate: Callable[[str], float] | None = None) -> str:
        """One of ``candidates`` by PFSP over the role's own record (or ``win_rate``)."""
        return self._take(branch, pfsp_choice(self.rng, win_rate or self.payoff.win_rate,
                                               candidates, weighting))

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

    def verification(self) -> tuple[list[str], int]:
        """(the members the role's deterministic policy should play after a generation,
        matches against each): none unless a role asks (:class:`MainSampler`)."""
        return [], 0

    def record_verified(self, results: Sequence[tuple[str, str]]) -> dict[str, float]:
        """The verification matches of the newest generation, ``(opponent, outcome)``; the
        win rate against each opponent they hold (draws half)."""
        return {}

    def wants_reset(self, generation: int) -> bool:
        """Should the trainer re-initialise the weights after registering ``generation``?
        As the role's declared :class:`~brawlkit.league.role_specs.ResetRule` says."""
        if self.spec is None:
            return False
        rule = self.spec.reset
        if rule.when == "every":
            return (generation + 1) % int(self.options[rule.option]) == 0
        if rule.when == "chance":
            return bool(self.rng.random() < self.options[rule.option])
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
    fixed_share: float
    pfsp_share: float
    exploiter_share: float
    struggle: float
    verify_matches: int
    selfplay_floor: float
    patch_share: float
    patch_pool: str
    pfsp_window: int
    pfsp_pool: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # what the newest generation's deterministic policy did against each main exploiter
        # it was verified against (plain counts, replaced at every verification)
        self.verified = Payoff(decay=1.0)

    def choose(self) -> str:
        if self.patch_share > 0.0:
            # Why: seed 1 of league_144_verify_long was verified 0.0 against the same main
            # exploiters for its last ten generations while they drew 0.08 of its games, and
            # its final Main trained against its best 5 M-step exploiter alone beat it 1.00
            # after 0.8 M steps (README).  Measured (league_144_patch, 2 seeds): it patches
            # what the league's exploiters find, not what a fresh best response finds (0.95,
            # 0.67), so it is off by default
            hard = self.patch_targets()
            if hard and self.rng.random() < self.patch_share:
                return self._pick("patch", hard, "squared", self.standing)
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
            hard = self.struggling()
            if hard:
                return self._pick("exploiters", hard, "squared", self.standing)
        return self._selfplay()

    def standing(self, exploiter: str) -> float:
        """Main's win rate against a main exploiter, as the struggle test reads it: the
        verification matches of what ships where they were played, else its own training
        games.  Why both: the exploiters train against Main's frozen deterministic policy
        and beat it, while its own record is of its sampled training policy (an exploiter
        not met yet: 0.5); on that record alone the branch stayed almost unused.  (On the
        verified one it woke on some seeds, not others: a Main verified at >= 0.6 throughout
        was hard to exploit, one verified at 0.0 for ten generations was beaten 1.00, the
        branch's games not patching the hole; docs/league.md.)"""
        if self.verified.games.get(exploiter, 0.0) > 0.0:
            return self.verified.win_rate(exploiter)
        return self.payoff.win_rate(exploiter)

    def struggling(self) -> list[str]:
        """The main exploiters Main struggles with (:meth:`standing` below ``struggle``)."""
        return [x for x in self.ids("main_exploiter") if self.standing(x) < self.struggle]

    def patch_targets(self) -> list[str]:
        """Whom ``patch_share`` goes to: the exploiters Main struggles with, or (``patch_pool
        = "newest"``) the newest main exploiter alone until Main beats it every time.  Why
        the second: seed 2 of league_144_verify_long, patched only while it struggled (below
        0.3, or 0.7), kept one hole its fresh exploiters all found (0.93); its final Main
        trained against one such exploiter alone for 2 M steps beat it 0.88 and was
        exploited 0.53 / 0.40 / 0.82 (``patched_exploit.json`` in
        docs/data/bench_exploit/league_144_harden_s2/).  Measured (league_144_focus, 3
        seeds): the rounds' mixtures exploited 0.10 / 0.48 / 0.28, where struggling-only
        rounds left 0.02 / 0.33 / 0.93 (README)."""
        if self.patch_pool == "newest":
            return [x for x in self.ids("main_exploiter")[-1:] if self.standing(x) < 1.0]
        return self.struggling()

    def verification(self) -> tuple[list[str], int]:
        """The newest ``pfsp_window`` main exploiters (0: all), ``verify_matches`` each."""
        if self.verify_matches <= 0:
            return [], 0
        exploiters = self.ids("main_exploiter")
        return exploiters[-self.pfsp_window:] if self.pfsp_window > 0 else exploiters, \
            self.verify_matches

    def record_verified(self, results: Sequence[tuple[str, str]]) -> dict[str, float]:
        self.verified = Payoff(decay=1.0)
        for opponent, outcome in results:
            self.verified.record(opponent, outcome)
        return {x: self.verified.win_rate(x) for x in self.verified.games}

    def stats(self) -> dict[str, float]:
        return {**super().stats(), "exploiters_struggling": float(len(self.struggling()))}

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "verified": self.verified.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if isinstance(state.get("verified"), dict):
            self.verified = Payoff(decay=1.0)
            self.verified.load_state_dict(state["verified"])

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
    threshold: float
    target: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: with ``target="held"``: the Main this lineage exploits (None until its first draw)
        self.held: str | None = None

    def choose(self) -> str:
        mains = self.ids("main")
        if not mains:
            return self._pick("pfsp", self.ids(), "variance")
        if self.target == "held":
            # Why: a fresh best response to the final, frozen Main beats it within 3-5 M
            # steps, while exploiters chasing Main's newest checkpoint are outgrown every
            # generation (README, league_144_verify); a lineage that keeps one Main finds
            # what bench exploit finds, and Main meets it through its exploiter branch
            if self.held not in mains:
                self.held = mains[-1]
            mains = mains[:mains.index(self.held) + 1]
        newest = mains[-1]
        if self.payoff.win_rate(newest) >= self.threshold:
            return self._take("main", newest)
        return self._pick("main_history", mains, "variance")

    def wants_reset(self, generation: int) -> bool:
        """As declared; a reset also lets go of the held Main, so the next lineage takes
        Main's newest."""
        reset = super().wants_reset(generation)
        if reset:
            self.held = None
        return reset

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "held": self.held}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        held = state.get("held")
        self.held = held if isinstance(held, str) else None



class LeagueExploiterSampler(LeagueSampler):
    role = "league_exploiter"
    fixed_share: float

    def choose(self) -> str:
        if self.fixed_share and self.rng.random() < self.fixed_share:
            return self._fixed()
        return self._pick("pfsp", self.ids(), "linear_capped")

