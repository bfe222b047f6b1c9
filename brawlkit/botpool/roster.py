"""The bots that may play right now, and their live Elo.

Pairing and seats draw from :attr:`Roster.bots`; every recorded match moves
:attr:`Roster.ratings` at once (:meth:`Roster.apply`), so the next draw and the
status table see it without waiting for a refresh.  A refresh — read by a
background thread every ``--refresh`` seconds, because a registry download must
never stall the ``select`` loop — replaces the bot set and overwrites the ratings
with the ones replayed from the whole match log.

A bot that fails to start :data:`MAX_START_FAILURES` times in a row (weights it
refuses, a blob that vanished) is left out for the rest of the run, refreshes
included: otherwise the pool would keep drawing it and voiding its matches.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable

from brawlkit.botpool.sources import INITIAL, K_FACTOR, Bot, Snapshot
from brawlkit.league.ratings import elo_expected
from brawlkit.league.records import ANONYMOUS_ID, MatchRecord

#: a bot that failed to start this often in a row is left out for the rest of the run
MAX_START_FAILURES = 3


def _names(ids: list[str]) -> str:
    """At most five ids, then ``...``: a log line, not a listing."""
    return f"{', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}"


class Roster:
    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say
        self.bots: dict[str, Bot] = {}
        self.ratings: dict[str, float] = {}
        self.excluded: dict[str, str] = {}          # bot id -> the last failed start
        self.start_failures: Counter[str] = Counter()
        self._fresh: Snapshot | None = None
        self._fresh_lock = threading.Lock()

    def rating(self, bot_id: str) -> float:
        return self.ratings.get(bot_id, INITIAL)

    # ------------------------------------------------------------------ refresh
    def take(self, snap: Snapshot | None = None) -> None:
        """Adopt ``snap`` (default: what the refresher left since the last call, if
        anything), saying who joined and who left."""
        if snap is None:
            with self._fresh_lock:
                snap, self._fresh = self._fresh, None
        if snap is None:
            return
        new = {k: v for k, v in snap.bots.items() if k not in self.excluded}
        joined = sorted(set(new) - set(self.bots))
        left = sorted(set(self.bots) - set(new))
        if joined or left:
            parts = []
            if joined:
                parts.append(f"{len(joined)} joined ({_names(joined)})")
            if left:
                parts.append(f"{len(left)} left ({_names(left)})")
            self.say(f"bots: {'; '.join(parts)}; {len(new)} in the pool")
        for line in snap.problems:
            self.say(f"bot left out: {line}")
        self.bots = new
        self.ratings.update(snap.ratings)

    def refresh_in_background(self, every: float, fetch: Callable[[], Snapshot],
                              messages: queue.Queue[str],
                              stopped: Callable[[], bool]) -> threading.Thread:
        """Start the thread that calls ``fetch`` every ``every`` seconds until
        ``stopped()``; the loop adopts its result with :meth:`take`.  It talks through
        ``messages`` only: the live table belongs to the loop's thread."""

        def run() -> None:
            while not stopped():
                deadline = time.monotonic() + every
                while time.monotonic() < deadline and not stopped():
                    time.sleep(0.2)
                if stopped():
                    return
                try:
                    snap = fetch()
                except Exception as e:  # noqa: BLE001 - a failed refresh keeps the old set
                    messages.put(f"refresh failed, keeping the previous bots: {e}")
                    continue
                with self._fresh_lock:
                    self._fresh = snap

        thread = threading.Thread(target=run, name="botpool-refresh", daemon=True)
        thread.start()
        return thread

    # ------------------------------------------------------------------ starts
    def start_failed(self, bot: Bot, reason: str) -> None:
        """A bot that exited before it joined an arena (weights refused, ...)."""
        self.start_failures[bot.id] += 1
        if self.start_failures[bot.id] >= MAX_START_FAILURES and bot.id not in self.excluded:
            self.excluded[bot.id] = reason
            self.bots.pop(bot.id, None)
            self.say(f"bot {bot.id} left out for this run: {MAX_START_FAILURES} failed starts, "
                     f"last: {reason}")

    def started(self, *bot_ids: str) -> None:
        """These bots played a match through: their failed starts are forgiven."""
        for bot_id in bot_ids:
            self.start_failures[bot_id] = 0

    # ------------------------------------------------------------------ results
    def apply(self, rec: MatchRecord) -> None:
        """The local Elo update of one result, until the next refresh replays the log
        (``anonymous`` is never rated: only the other side moves)."""
        ra, rb = self.rating(rec.a), self.rating(rec.b)
        delta = K_FACTOR * (rec.score - elo_expected(ra, rb))
        if rec.a != ANONYMOUS_ID:
            self.ratings[rec.a] = ra + delta
        if rec.b != ANONYMOUS_ID:
            self.ratings[rec.b] = rb - delta
