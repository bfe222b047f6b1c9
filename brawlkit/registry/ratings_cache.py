"""The registry's ratings, computed once per state of the match log.

``GET /ratings`` replays every stored match (Elo) and fits Bradley–Terry with
``bootstrap`` refits: seconds on 100,000 matches.  Matches and checkpoints are
append-only, so the table depends only on :meth:`RegistryDB.ratings_state`
(the newest match, the checkpoints' count and newest upload) and the request's settings: that is the
cache key.  A repeated request costs those index lookups.  A new match
makes the next request compute the table again, once: concurrent requests for the
same key await that one computation, and computations run one at a time, so the
ratings never take more than one core (and one worker thread) from the rest of
the service, however many readers poll them.  The waiting happens in the event
loop, not in worker threads, so fifty pollers cannot starve the uploads of the
thread pool.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from brawlkit.league.directory import permanent_members
from brawlkit.league.ratings import league_table
from brawlkit.league.records import MatchRecord
from brawlkit.registry.database import RegistryDB

#: tables kept (one per combination of settings in use; each is a few KB)
CACHE_SIZE = 16


@dataclass
class MatchLog:
    """Every stored match in replay order, kept between computations and brought up
    to date with only the rows added since (the log is append-only, and a later
    batch gets larger seqs): a new state costs the new rows, not a read of
    100,000."""

    records: list[MatchRecord] = field(default_factory=list)
    seq: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self, db: RegistryDB) -> list[MatchRecord]:
        with self._lock:  # the warm-up thread and a computation may overlap
            new, self.seq = db.matches_after(self.seq)
            if new:
                self.records = sorted(self.records + new, key=lambda r: r.sort_key)
            return self.records

    def warm(self, db: RegistryDB) -> threading.Thread:
        """Read the whole log in a background thread (at the service's start), so the
        first ``GET /ratings`` does not pay for reading 100,000 rows as well."""
        t = threading.Thread(target=self.current, args=(db,), name="ratings-warm-up",
                             daemon=True)
        t.start()
        return t


def compute_table(db: RegistryDB, log: MatchLog, k: float, initial: float, bootstrap: int,
                  seed: int) -> bytes:
    """The ``elo --json`` table (without ``league_dir``) of every stored match."""
    members = permanent_members() + db.members()
    table = league_table(members, log.current(db), k=k, initial=initial,
                         bootstrap=bootstrap, seed=seed)
    return json.dumps(table).encode("utf-8")


@dataclass
class RatingsCache:
    """The JSON bytes of the ratings table per (database state, settings)."""

    size: int = CACHE_SIZE
    _tables: OrderedDict[tuple[Any, ...], bytes] = field(default_factory=OrderedDict)
    _running: dict[tuple[Any, ...], asyncio.Future[bytes]] = field(default_factory=dict)
    _one_at_a_time: asyncio.Lock | None = None
    log: MatchLog = field(default_factory=MatchLog)
    hits: int = 0
    computed: int = 0

    async def table(self, db: RegistryDB, k: float, initial: float, bootstrap: int,
                    seed: int) -> tuple[bytes, bool]:
        """The table as JSON bytes, and whether it was served without computing it."""
        state = await run_in_threadpool(db.ratings_state)
        key = (state, float(k), float(initial), int(bootstrap), int(seed))
        if key in self._tables:
            self._tables.move_to_end(key)
            self.hits += 1
            return self._tables[key], True
        if key in self._running:  # someone computes it right now: wait for that
            self.hits += 1
            return await asyncio.shield(self._running[key]), True
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._running[key] = future
        try:
            if self._one_at_a_time is None:
                self._one_at_a_time = asyncio.Lock()
            async with self._one_at_a_time:
                data = await run_in_threadpool(compute_table, db, self.log, k, initial,
                                               bootstrap, seed)
            future.set_result(data)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._running[key]
        self._tables[key] = data
        self.computed += 1
        while len(self._tables) > self.size:
            self._tables.popitem(last=False)
        return data, False
