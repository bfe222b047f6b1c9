"""Where a finished match goes, and what a failed one counts as.

A result (:meth:`Recorder.result`) becomes ONE :class:`MatchRecord` (source
``botpool``), made by the league's one match writer
(:class:`~brawlkit.league.sink.MatchSink`: its time rule, both sides ``fixed`` — a
bot plays its frozen ``.bpw`` as ``brawlpit_bot`` does): appended to the league's match log, queued for the registry
(:class:`~brawlkit.botpool.poster.Poster`), counted in this run's W/D/L and handed to
the roster's live Elo.  Its replay, when ``--replays`` is on, is expected in the
directory its server records into (:meth:`Recorder.record_dir`) and kept if the match
was an upset (:class:`~brawlkit.botpool.replays.ReplayKeeper`).

A failure is a VOID (:meth:`Recorder.void`): never a result, only a count by reason
for the summary.  Pairing and seats decide *that* a match is void and say why; the
reason is reduced here to its kind (no pid, no id), so the summary groups alike
failures.
"""

from __future__ import annotations

import json
import queue
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brawlkit.botpool.options import Options
from brawlkit.botpool.poster import Poster
from brawlkit.botpool.procs import Result
from brawlkit.botpool.replays import ReplayKeeper
from brawlkit.league.directory import LeagueDir
from brawlkit.league.records import MatchRecord
from brawlkit.league.sink import MatchSink
from brawlkit.wire.constants import C

SOURCE = "botpool"
#: how a result reads in a log line, from side a's view
VERBS = {"win": "beats", "loss": "loses to", "draw": "draws with"}


def outcome(slot: int | None, r: Result) -> str | None:
    """The result from the side of the bot in ``slot``; None when the match has none."""
    if r.winner == C.BP_WINNER_DRAW:
        return "draw"
    if r.winner not in (0, 1) or slot is None:
        return None
    return "win" if r.winner == slot else "loss"


def pair_void_kind(reason: str) -> str:
    """``hung`` for a timeout, else the reason without its leading ``ID (pid N)`` and its
    parenthesised detail (``killed by SIGKILL``, ``server died``)."""
    if reason.startswith("hung"):
        return reason.split(":")[0]
    return re.sub(r"^\S+ \(pid \d+\) ", "", reason).split(" (")[0]


def seat_void_kind(reason: str) -> str:
    """``human: `` and the reason without its parenthesised detail."""
    return "human: " + reason.split(" (")[0]


class Recorder:
    def __init__(self, opts: Options, league: LeagueDir | None, client: Any | None,
                 messages: queue.Queue[str], say: Callable[[str], None],
                 rate: Callable[[MatchRecord], None], can_record: bool) -> None:
        """``rate``: the live Elo update of a result; ``can_record``: whether this
        ``brawlpit_server`` has ``--record`` (without it no replay is kept)."""
        self.say = say
        self._rate = rate
        self.sink = MatchSink(league, SOURCE)
        self.poster: Poster | None = Poster(client, messages) if client is not None else None
        self.keeper: ReplayKeeper | None = None
        if opts.replays is not None:
            if can_record:
                self.keeper = ReplayKeeper(opts.replays, opts.keep_upsets)
            else:
                messages.put("replays: this brawlpit_server has no --record option; "
                             "no replays are kept")
        self.incoming: dict[tuple[str, int], Path] = {}   # (server kind, gen) -> its dir
        self.completed = 0
        self.human_completed = 0
        self.voids = 0
        self.void_reasons: Counter[str] = Counter()
        self.wdl: dict[str, list[int]] = {}

    def record_dir(self, kind: str, gen: int) -> Path | None:
        """Where the ``gen``-th incarnation of the ``kind`` server records its replays
        (None: no replays are kept).  Remembered, so a result knows where to look."""
        if self.keeper is None:
            return None
        d = self.keeper.incoming(f"{kind}-{gen}")
        self.incoming[(kind, gen)] = d
        return d

    # ------------------------------------------------------------------ results
    def result(self, a: str, b: str, result: str, ticks: int, ticket: str | None = None,
               *, human: bool = False) -> MatchRecord:
        """Record one finished match (``result`` from a's side); returns its record."""
        rec = self.sink.record(a, b, result, ticks)
        self.sink.write([rec])
        if self.poster is not None:
            self.poster.put(rec, ticket)
        self._tally(rec)
        self._rate(rec)
        self.completed += 1
        if human:
            self.human_completed += 1
        return rec

    def keep_replay(self, kind: str, gen: int, arena: int | None, match_id: int,
                    rec: MatchRecord, rating_a: float, rating_b: float) -> None:
        """The replay of ``rec`` (pre-match ratings given) will appear where its server
        records: the keeper claims it if it is an upset."""
        if self.keeper is None or arena is None:
            return
        inc = self.incoming.get((kind, gen))
        if inc is not None:
            self.keeper.expect(inc, arena, match_id, rec, rating_a, rating_b)

    def void(self, kind: str) -> None:
        """One void match of this kind (:func:`pair_void_kind`, :func:`seat_void_kind`)."""
        self.voids += 1
        self.void_reasons[kind] += 1

    def _tally(self, rec: MatchRecord) -> None:
        """This run's W/D/L of both sides (the status table's columns)."""
        for side, res in ((rec.a, rec.result), (rec.b, {"win": "loss", "loss": "win"}.get(
                rec.result, rec.result))):
            row = self.wdl.setdefault(side, [0, 0, 0])
            row[{"win": 0, "draw": 1, "loss": 2}[res]] += 1

    # ------------------------------------------------------------------ upkeep
    def poll_replays(self) -> None:
        """Let the keeper claim the replays that appeared (and delete strays)."""
        if self.keeper is not None:
            for line in self.keeper.poll():
                self.say(line)

    def close(self) -> list[tuple[MatchRecord, str | None]]:
        """Close the log, stop the poster (it tries once more), settle the replays;
        returns what could not be posted (record, ticket)."""
        self.sink.close()
        unposted: list[tuple[MatchRecord, str | None]] = []
        if self.poster is not None:
            unposted = self.poster.close()
        if self.keeper is not None:
            for line in self.keeper.close():
                self.say(line)
        return unposted

    def save_unposted(self, unposted: list[tuple[MatchRecord, str | None]]) -> None:
        """Results the registry never got, to ``$TMPDIR/botpool-unposted-<time>.jsonl``
        (one record per line with its ticket): they are real matches, not to be lost
        with the process."""
        if not unposted:
            return
        path = Path(tempfile.gettempdir()) / f"botpool-unposted-{int(time.time())}.jsonl"
        path.write_text("".join(json.dumps({**r.to_json(), "ticket": t}) + "\n"
                                for r, t in unposted))
        self.say(f"{len(unposted)} result(s) could not be posted to the registry; "
                 f"saved to {path}")

    def summary_parts(self) -> list[str]:
        """The summary's words on where results went."""
        parts = []
        if self.poster is not None:
            parts.append(f"{self.poster.posted} posted to the registry")
        if self.keeper is not None:
            parts.append(f"{len(self.keeper.entries)} replay(s) kept")
        return parts
