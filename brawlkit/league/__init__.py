"""The league: who plays whom, and how strong everyone is (docs/league.md).

``records`` (members, matches) → ``pool`` (the league directory: write-once members,
append-only match logs) → ``ratings`` (Elo replayed, Bradley–Terry) and ``pfsp`` /
``roles`` (opponent sampling per role) → ``opponents`` (baseline, frozen members) →
``trainee`` (a training run as a member) → ``run`` (``league run``), ``elo_cli``,
``plots``.  ``curriculum`` is the CPU curriculum a run without a league uses.
"""

from brawlkit.league.curriculum import CpuCurriculum, OpponentSampler

__all__ = ["CpuCurriculum", "OpponentSampler"]
