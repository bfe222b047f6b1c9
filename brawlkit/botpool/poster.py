"""Results to the registry, in the background: a registry that is down never stalls the pool.

Results are queued and sent by one thread; a batch that cannot be sent
(``RegistryUnavailable``) stays queued and is retried every few seconds, as
:class:`brawlkit.registry.sync.RegistrySync` keeps what it could not push.  A
record naming ``player:NAME`` goes alone with its ticket (spec: a record with a bad
ticket refuses the whole batch, so one human's expired ticket must not cost the
bots' results); if the registry refuses the ticket (403) the match is sent again
against ``anonymous``: the human played, only their identity could not be proven.
"""

from __future__ import annotations

import inspect
import queue
import threading
from dataclasses import replace
from typing import Any

from brawlkit.league.records import ANONYMOUS_ID, PLAYER_PREFIX, MatchRecord
from brawlkit.registry.client import RegistryError, RegistryUnavailable

RETRY_S = 3.0
BATCH = 1000


class Poster:
    def __init__(self, client: Any, messages: queue.Queue[str]) -> None:
        self.client = client
        self.messages = messages
        self._pending: list[tuple[MatchRecord, str | None]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._down = False
        self.posted = 0
        self.refused = 0
        try:
            self._tickets = "tickets" in inspect.signature(client.post_matches).parameters
        except (TypeError, ValueError):
            self._tickets = False
        self._thread = threading.Thread(target=self._run, name="botpool-poster", daemon=True)
        self._thread.start()

    @property
    def queued(self) -> int:
        with self._lock:
            return len(self._pending)

    def put(self, rec: MatchRecord, ticket: str | None = None) -> None:
        with self._lock:
            self._pending.append((rec, ticket))
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(RETRY_S)
            self._wake.clear()
            with self._lock:
                batch, self._pending = self._pending, []
            left: list[tuple[MatchRecord, str | None]] = []
            if batch:
                left = self._send(batch)
                with self._lock:
                    self._pending = left + self._pending
            if self._stop:
                with self._lock:
                    more = bool(self._pending)
                if left or not more:  # down (kept for the caller), or all sent
                    return
                self._wake.set()  # results queued while the last batch was on its way

    def _send(self, batch: list[tuple[MatchRecord, str | None]]) -> list[tuple[MatchRecord, str | None]]:
        """Send what it can; returns what must wait for the registry to come back."""

        plain = [r for r, t in batch if t is None]
        ticketed = [(r, t) for r, t in batch if t is not None]
        try:
            while plain:
                chunk = plain[:BATCH]
                try:
                    self.client.post_matches(chunk)
                    self.posted += len(chunk)
                except RegistryUnavailable:
                    raise
                except RegistryError as e:
                    self.refused += len(chunk)
                    self.messages.put(f"registry refused {len(chunk)} result(s), dropped: {e}")
                plain = plain[BATCH:]
            while ticketed:
                rec, ticket = ticketed[0]
                try:
                    if self._tickets:
                        self.client.post_matches([rec], tickets={0: ticket})
                    else:
                        self.client.post_matches([rec])
                    self.posted += 1
                except RegistryUnavailable:
                    raise
                except RegistryError as e:
                    if e.status == 403:
                        anon = replace(rec, b=ANONYMOUS_ID) if rec.b.startswith(PLAYER_PREFIX) \
                            else replace(rec, a=ANONYMOUS_ID)
                        self.messages.put(f"registry refused the ticket of {rec.b} ({e}): "
                                          "recorded against anonymous, only the bot's rating moves")
                        plain.append(anon)
                    else:
                        self.refused += 1
                        self.messages.put(f"registry refused a human result, dropped: {e}")
                ticketed.pop(0)
            if plain:  # anonymous re-sends
                self.client.post_matches(plain)
                self.posted += len(plain)
                plain = []
        except RegistryUnavailable as e:
            left: list[tuple[MatchRecord, str | None]] = [(r, None) for r in plain]
            left += ticketed
            if not self._down:
                self.messages.put(f"registry unreachable, {len(left)} result(s) queued: {e}")
            self._down = True
            return left
        if self._down:
            self.messages.put("registry reachable again: queued results sent")
        self._down = False
        return []

    def close(self, timeout: float = 20.0) -> list[tuple[MatchRecord, str | None]]:
        """One last send (bounded by ``timeout``); returns what is still unsent."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout)
        with self._lock:
            return list(self._pending)
