"""The registry's active checkpoint: what the human seats play by default.

An operator says which checkpoint people face with ``registry activate ID``; the
pool follows without a restart.  :class:`ActiveWatch` asks ``GET /active`` every
``--active-refresh`` seconds in a background thread (a slow or down registry must
never stall the ``select`` loop, nor a seat waiting for its human), downloads the
new active blob into the pool's cache (LZ4 on the wire, sha256-checked: the same
cache as the bot set, so a known checkpoint costs no download), and hands the
:class:`~brawlkit.botpool.sources.Bot` over through one locked slot.  The loop
takes it each step: the next seat bot started plays it, and a seat whose bot is
still *waiting* (no human yet) is replaced at once, so the next human match plays
the new one; a match in flight is played out.

A registry that is down keeps the last known active checkpoint; one whose active
checkpoint is disabled (``GET /active``: 404) or has no blob leaves the seats
drawing from every bot, as without a registry.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from brawlkit.botpool.sources import Bot, registry_bot
from brawlkit.registry.client import RegistryError

#: what the slot holds when nothing new was read since the last take
_NOTHING = object()


class ActiveWatch:
    """Follows the registry's active checkpoint (see the module docstring)."""

    def __init__(self, client: Any, messages: queue.Queue[str]) -> None:
        self.client = client
        self.messages = messages
        self.current: Bot | None = None      # the loop's view, after take()
        self._seen: str | None = None        # the active id the thread last adopted
        self._fresh: Any = _NOTHING
        self._lock = threading.Lock()
        self._failing = False

    def poll(self) -> None:
        """One look at ``GET /active`` (in whichever thread calls it); a change is left
        for :meth:`take`.  Errors are said once per outage and keep the last known."""
        try:
            rec = self.client.active()
            if rec is not None and not rec.get("blob_sha256"):
                if rec["id"] != self._seen:
                    self.messages.put(f"active checkpoint {rec['id']} has no blob: the "
                                      "seats draw from every bot")
                rec = None
            new_id = None if rec is None else str(rec["id"])
            if new_id == self._seen:
                self._failing = False
                return
            bot = None if rec is None else registry_bot(self.client, rec)
        except RegistryError as e:
            if not self._failing:
                self.messages.put(f"active checkpoint not refreshed, keeping "
                                  f"{self._seen or 'none'}: {e}")
            self._failing = True
            return
        self._failing = False
        self._seen = new_id
        with self._lock:
            self._fresh = bot

    def take(self) -> bool:
        """Adopt what :meth:`poll` found since the last call; True when it changed."""
        with self._lock:
            fresh, self._fresh = self._fresh, _NOTHING
        if fresh is _NOTHING:
            return False
        before = self.current
        self.current = fresh
        return (before.id if before else None) != (fresh.id if fresh else None)

    def run_in_background(self, every: float, stopped: Callable[[], bool]) -> threading.Thread:
        """Poll every ``every`` seconds until ``stopped()``."""

        def run() -> None:
            while not stopped():
                deadline = time.monotonic() + every
                while time.monotonic() < deadline and not stopped():
                    time.sleep(0.1)
                if not stopped():
                    self.poll()

        thread = threading.Thread(target=run, name="botpool-active", daemon=True)
        thread.start()
        return thread
