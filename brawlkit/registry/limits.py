"""Per-client request rate limits of the registry (standard library only).

Why in the service and not only in a proxy: a registry on a team's box is often
reached directly, and the requests that cost most are cheap to send — a
``POST /auth/token`` is one scrypt hash (16 MiB, ~80 ms of a core), a ``GET
/ratings`` a replay of the whole match log.  Each agent (by its token) and each
unauthenticated client (by its address) gets a token bucket: ``rate`` requests
per second on average, bursts of ``burst``.  A request over it is answered
**429** with ``Retry-After`` (whole seconds until a request would pass) before it
does any work; the client (:mod:`brawlkit.registry.client`) waits that long and
retries.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

#: the defaults of ``registry serve``'s limits, declared once (the service's
#: :class:`~brawlkit.registry.deps.Registry`, the slow-client guard and the CLI use them)
#: a request's line and headers must be complete within this (s)
HEADER_TIMEOUT_S = 10.0
#: a request body may pause this long, and must average 1 KiB/s after it (s)
BODY_TIMEOUT_S = 30.0
#: open connections at most
MAX_CONNECTIONS = 256
#: open connections from one client address at most (0: no per-address bound), so one
#: address cannot hold every connection the service takes (as nginx's limit_conn)
MAX_CONNECTIONS_PER_ADDRESS = 64
#: the largest request head (request line and headers) in bytes; larger gets 400
MAX_HEAD_BYTES = 16 * 1024
#: one agent's requests per second on average; bursts of AGENT_BURST_FACTOR times that
AGENT_RATE = 50.0
AGENT_BURST_FACTOR = 4.0
#: one address's requests per second on the routes without a token (each
#: ``/auth/token``, sign-up and ticket costs a scrypt hash), and its burst
ANON_RATE, ANON_BURST = 2.0, 20.0
#: the most bootstrap resamples a read-scoped agent's ``GET /ratings`` computes
READ_BOOTSTRAP_MAX = 10

#: how often the refusals of one kind are logged at most (seconds)
LOG_EVERY_S = 10.0

log = logging.getLogger("brawlkit.registry")

#: buckets kept at most (the oldest idle ones are forgotten first: a forgotten
#: bucket is a full one, which is what an idle client has anyway)
MAX_BUCKETS = 10_000


@dataclass
class RateLimiter:
    """Token buckets of ``rate`` requests/s and ``burst`` requests, one per key.
    ``rate`` 0 turns the limit off.  Thread-safe (the routes run in a thread pool)."""

    rate: float
    burst: float
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: refusals by kind of key ("agent", "address"): logged at most every
    #: :data:`LOG_EVERY_S` per kind, with the running count and the last key
    refused: Counter[str] = field(default_factory=Counter)
    _logged: dict[str, float] = field(default_factory=dict)

    @classmethod
    def per_agent(cls, rate: float = AGENT_RATE) -> RateLimiter:
        """The limit of one agent: ``rate`` per second, bursts of
        :data:`AGENT_BURST_FACTOR` times that (at least one request)."""
        return cls(rate, max(1.0, AGENT_BURST_FACTOR * rate))

    def retry_after(self, key: str, kind: str = "agent", now: float | None = None) -> int:
        """0 when a request of ``key`` may pass now (and it is counted), else the whole
        seconds until one may (the request is refused and counted under ``kind``)."""
        if self.rate <= 0:
            return 0
        t = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.pop(key, (self.burst, t))
            tokens = min(self.burst, tokens + (t - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, t)  # re-inserted: the newest
                wait = 0
            else:
                self._buckets[key] = (tokens, t)
                self.refused[kind] += 1
                wait = max(1, math.ceil((1.0 - tokens) / self.rate))
            while len(self._buckets) > MAX_BUCKETS:
                del self._buckets[next(iter(self._buckets))]
            if wait and t - self._logged.get(kind, -LOG_EVERY_S) >= LOG_EVERY_S:
                self._logged[kind] = t
                log.warning("registry: %d request(s) over the rate limit so far (429) by "
                            "%s; the last by %s %r", self.refused[kind], kind, kind, key)
        return wait
