"""The league: who plays whom.  Today the opponent-sampling interface and the
CPU curriculum (``curriculum.py``); the pool of frozen checkpoints, PFSP and
Elo will live here too."""

from brawlkit.league.curriculum import CpuCurriculum, OpponentSampler

__all__ = ["CpuCurriculum", "OpponentSampler"]
