"""Slow and greedy clients: read timeouts and a connection bound for uvicorn.

Why this module: uvicorn (0.54, the pinned server) times out only *idle
keep-alive* connections (``timeout_keep_alive``, armed after a response).  A
connection that sends half a request head — or nothing at all — or a body one
byte at a time is held forever, and ``limit_concurrency`` answers 503 to new
*requests* but never closes a connection that has not finished one.  150 such
connections were all still open after 40 s.  So the registry serves with
:class:`GuardedH11Protocol`, uvicorn's own h11 protocol plus three rules:

* **header timeout** — the request line and headers must be complete within
  ``header_timeout`` seconds of the connection (or of the request's first byte
  after a keep-alive pause); trickling bytes does not extend it;
* **body timeout** — while a body is being read, a pause of ``body_timeout``
  seconds closes the connection, and so does a body slower on average than
  :data:`MIN_BODY_RATE` bytes/s after that grace (a slowloris of one byte every
  few seconds); time while *the service* pauses reading (its buffer is full) does
  not count;
* **connection bound** — past ``max_connections`` open connections, a new one is
  closed at once, before it costs a parser or a task;
* **per-address bound** — past ``max_per_address`` open connections from one client
  address (0: no such bound), a new one from it is closed at once, so one address
  cannot hold every connection of the service (256 idle connections from one address
  shut every client out for up to the header timeout, renewable), as nginx's
  ``limit_conn`` per address.

Once the request is complete nothing is timed: how long the route takes is the
service's business.  Every close is counted by reason and logged, at most once
per :data:`LOG_EVERY_S` per reason, with the running count.

Why not another server: hypercorn and granian have header/body read timeouts of
their own, but switching servers changes the process model, logging and shutdown
of ``registry serve`` for one feature, and adds a dependency; this is some 100
lines on the protocol class uvicorn documents as pluggable (``Config(http=...)``),
and ``tests/test_registry_hostile.py`` checks it against the real server.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from brawlkit.registry.limits import (
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_ADDRESS,
)

#: the slowest average body a client may send after the body timeout's grace (B/s)
MIN_BODY_RATE = 1024
#: how often one reason of closing is logged at most (seconds)
LOG_EVERY_S = 10.0

log = logging.getLogger("brawlkit.registry")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header/body read timeouts and a connection bound
    (the class attributes; :func:`guarded_protocol` makes a configured subclass)."""

    header_timeout: ClassVar[float] = HEADER_TIMEOUT_S
    body_timeout: ClassVar[float] = BODY_TIMEOUT_S
    max_connections: ClassVar[int] = MAX_CONNECTIONS
    max_per_address: ClassVar[int] = MAX_CONNECTIONS_PER_ADDRESS
    closed: ClassVar[Counter[str]] = Counter()
    #: open connections per client address (the event loop's thread only: no lock)
    open_by_address: ClassVar[Counter[str]] = Counter()
    _logged: ClassVar[dict[str, float]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._guard: asyncio.TimerHandle | None = None
        self._head_deadline: float | None = None
        self._body_start = 0.0
        self._body_bytes = 0
        self._body_last = 0.0
        self._address: str | None = None

    # ------------------------------------------------------------ the protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.client and self.max_per_address > 0:
            self._address = str(self.client[0])
            self.open_by_address[self._address] += 1
            if self.open_by_address[self._address] > self.max_per_address:
                self._close("over --max-connections-per-address open connections from one "
                            f"address (the last: {self._address})", key="over "
                            "--max-connections-per-address open connections from one address")
                return
        if len(self.connections) > self.max_connections:
            self._close("over --max-connections open connections")
            return
        self._head_deadline = time.monotonic() + self.header_timeout
        self._arm()

    def data_received(self, data: bytes) -> None:
        state = self.conn.their_state
        super().data_received(data)
        now = time.monotonic()
        if state is h11.SEND_BODY or self.conn.their_state is h11.SEND_BODY:
            if state is not h11.SEND_BODY:  # the head just completed
                self._body_start, self._body_bytes = now, 0
            self._body_bytes += len(data)
            self._body_last = now
        elif self.conn.their_state is h11.IDLE and self._head_deadline is None:
            self._head_deadline = now + self.header_timeout  # a new request has begun
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._address is not None:
            n = self.open_by_address[self._address] - 1
            if n > 0:
                self.open_by_address[self._address] = n
            else:
                del self.open_by_address[self._address]
            self._address = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self._head_deadline = None  # the keep-alive timeout takes over until new bytes
        super().on_response_complete()
        self._arm()

    # ------------------------------------------------------------ the timer
    def _deadline(self) -> tuple[float | None, str]:
        """When this connection is closed unless it makes progress, and why."""
        their = self.conn.their_state
        if their is h11.IDLE and self._head_deadline is not None:
            return self._head_deadline, f"request head not complete within {self.header_timeout} s"
        if their is h11.SEND_BODY:
            idle = self._body_last + self.body_timeout
            slow = self._body_start + self.body_timeout + self._body_bytes / MIN_BODY_RATE
            if idle <= slow:
                return idle, f"no body byte for {self.body_timeout} s"
            return slow, f"body slower than {MIN_BODY_RATE} B/s"
        return None, ""

    def _arm(self) -> None:
        self._disarm()
        when, _why = self._deadline()
        if when is not None and not self.transport.is_closing():
            self._guard = self.loop.call_later(max(0.0, when - time.monotonic()), self._expired)

    def _disarm(self) -> None:
        if self._guard is not None:
            self._guard.cancel()
            self._guard = None

    def _expired(self) -> None:
        self._guard = None
        when, why = self._deadline()
        if when is None or self.transport.is_closing():
            return
        if self.flow.read_paused:  # the service is not reading: the client is not late
            self._body_last = time.monotonic()
            self._body_start += self.body_timeout
        elif when <= time.monotonic() + 0.01:
            self._close(why)
            return
        self._arm()

    def _close(self, why: str, key: str | None = None) -> None:
        """Close the connection at once (counted by ``key``, default ``why``, and
        logged with ``why``)."""
        cls = type(self)
        key = key or why
        cls.closed[key] += 1
        now = time.monotonic()
        if now - cls._logged.get(key, -LOG_EVERY_S) >= LOG_EVERY_S:
            cls._logged[key] = now
            log.warning("registry: closed %d connection(s) so far: %s", cls.closed[key], why)
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
        self.transport.abort()


def guarded_protocol(header_timeout: float, body_timeout: float, max_connections: int,
                     max_per_address: int = MAX_CONNECTIONS_PER_ADDRESS
                     ) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` with these limits, for ``uvicorn.Config(http=...)``."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {
        "header_timeout": float(header_timeout), "body_timeout": float(body_timeout),
        "max_connections": int(max_connections), "max_per_address": int(max_per_address),
        "closed": Counter(), "open_by_address": Counter(), "_logged": {}})
