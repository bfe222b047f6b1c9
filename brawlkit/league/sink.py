"""The one writer of match records: every match the toolkit plays becomes a record here.

Training (``training/league_member.py``), evaluation, the fixed ladder
(``league/ladder.py``), the bot pool (``botpool/recording.py``), ``/move`` fights
(``policy_server/results.py``) and the matches a registry pull brings in
(``registry/sync.py``) all make and write their records through a :class:`MatchSink`,
so there is one time rule and one shape:

* **the time rule**: a record's ``time`` is when the match ended (epoch seconds, the
  caller's clock or now), inside the match-record rule's window
  (:data:`~brawlkit.league.records.TIME_WINDOW`); within one sink times strictly
  increase, a time at or before the last one given out is moved just after it
  (:data:`TIME_STEP`).  A match *is* its content — a league directory and the
  registry both count identical records once — so two real matches must never share
  every field; matches of one batch are stamped in the order they ended.
* **who played as what**: each side's policy (``fixed`` for the player its id names,
  ``sampled``, ``training``) and the match seed when the writer chose it.

What the sink does not do is send: the registry paths keep their own clients
(``RegistrySync.push``, the bot pool's ``Poster`` with tickets, ``/move``'s
``ResultSink``), and each sends exactly the records this sink made and wrote.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from brawlkit.common.io import Closing
from brawlkit.league.directory import LeagueDir, MatchWriter
from brawlkit.league.records import MatchRecord

#: the least gap between two times one sink gives out: a microsecond, far above the
#: float spacing of epoch seconds (about 2e-7 s until 2106)
TIME_STEP = 1e-6


class MatchSink(Closing):
    """Makes match records (:meth:`record`) and appends them to a league directory's
    log (:meth:`write`; one log file per sink, ``source`` in its name).  Without a
    league directory it only makes records (a process that only posts to a registry)."""

    def __init__(self, league: LeagueDir | None, source: str) -> None:
        self.source = source
        self.writer: MatchWriter | None = league.writer(source) if league is not None else None
        self._last = 0.0

    @property
    def name(self) -> str | None:
        """The writer name of its log (None without a league directory)."""
        return self.writer.name if self.writer is not None else None

    def stamp(self, t: float | None = None) -> float:
        """The time of a match that ended at ``t`` (default now) by the one time rule:
        strictly after every time this sink gave out before."""
        t = time.time() if t is None else float(t)
        t = max(t, self._last + TIME_STEP)
        self._last = t
        return t

    def record(self, a: str, b: str, result: str, ticks: int, *, time: float | None = None,
               seed: int | None = None, a_policy: str = "fixed", b_policy: str = "fixed",
               source: str | None = None) -> MatchRecord:
        """The record of one match that ended at ``time`` (default now): checked by the
        match-record rule (``ValueError`` naming the field), not yet written."""
        rec = MatchRecord(time=self.stamp(time), a=a, b=b, result=result, ticks=int(ticks),
                          source=self.source if source is None else source, seed=seed,
                          a_policy=a_policy, b_policy=b_policy)
        return MatchRecord.from_json(rec.to_json())

    def records(self, matches: Iterable[dict[str, Any]], **common: Any) -> list[MatchRecord]:
        """Records of several matches (each a dict of :meth:`record`'s arguments, with
        ``common`` for all), stamped in the order they ended."""
        rows = [{**common, **m} for m in matches]
        rows.sort(key=lambda m: time.time() if m.get("time") is None else float(m["time"]))
        return [self.record(**m) for m in rows]

    def adopt(self, recs: Iterable[MatchRecord]) -> list[MatchRecord]:
        """Records made elsewhere (another machine's, pulled from a registry), kept as
        they are — their times were stamped by their own sink — after the match-record
        rule: what this sink writes, whoever made it, passed one rule."""
        return [MatchRecord.from_json(r.to_json()) for r in recs]

    def write(self, recs: Iterable[MatchRecord]) -> list[MatchRecord]:
        """Append ``recs`` to the log (one write, one fsync); returns them."""
        out = list(recs)
        if self.writer is not None and out:
            self.writer.write_many(out)
        return out

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
