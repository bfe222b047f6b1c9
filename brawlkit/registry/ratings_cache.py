"""The registry's ratings, computed once per state of the match log.

``GET /ratings`` replays every stored match (Elo) and fits Bradley–Terry with
``bootstrap`` refits: seconds on 100,000 matches.  Matches and checkpoints are
append-only, so the table depends only on :meth:`RegistryDB.ratings_state`
(counts and the newest row of each) and the request's settings: that is the
cache key.  A repeated request costs two ``count``/``max`` queries; a new match
makes the next request compute the table again, once — concurrent requests for
the same key wait for that one computation (one at a time: the ratings never take
more than one core from the rest of the service).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from brawlkit.league.directory import permanent_members
from brawlkit.league.ratings import league_table
from brawlkit.registry.database import RegistryDB

#: tables kept (one per combination of settings in use; each is a few KB)
CACHE_SIZE = 16


@dataclass
class RatingsCache:
    """The JSON bytes of the ratings table per (database state, settings)."""

    size: int = CACHE_SIZE
    _tables: OrderedDict[tuple[Any, ...], bytes] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _compute: threading.Lock = field(default_factory=threading.Lock)
    hits: int = 0
    computed: int = 0

    def table(self, db: RegistryDB, k: float, initial: float, bootstrap: int,
              seed: int) -> tuple[bytes, bool]:
        """The ``elo --json`` table of every stored match, as JSON bytes, and whether it
        came from the cache."""
        settings = (float(k), float(initial), int(bootstrap), int(seed))

        def compute() -> bytes:
            members = permanent_members() + db.members()
            table = league_table(members, db.matches(), k=k, initial=initial,
                                 bootstrap=bootstrap, seed=seed)
            return json.dumps(table).encode("utf-8")

        return self._get((db.ratings_state(), settings), compute)

    def _get(self, key: tuple[Any, ...], compute: Callable[[], bytes]) -> tuple[bytes, bool]:
        with self._lock:
            if key in self._tables:
                self._tables.move_to_end(key)
                self.hits += 1
                return self._tables[key], True
        with self._compute:  # one computation at a time; the waiters find its result
            with self._lock:
                if key in self._tables:
                    self.hits += 1
                    return self._tables[key], True
            data = compute()
            with self._lock:
                self._tables[key] = data
                self.computed += 1
                while len(self._tables) > self.size:
                    self._tables.popitem(last=False)
        return data, False
