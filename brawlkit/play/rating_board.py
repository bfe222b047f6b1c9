"""Ratings to show next to the names, from the registry's ``GET /ratings``.

Why optional and in the background: a bot pool already puts a bot's live rating in
its name (``"<member id> (<rating>)"``), which the HUD shows as is; the registry's
table adds the ratings of everyone else it rates (a human ``player:NAME``, the CPU
``cpu:L``).  Reading it needs agent credentials (``BRAWLKIT_AGENT_ID`` /
``BRAWLKIT_AGENT_SECRET``, scope read), which a player often does not have, and an
HTTP request must never stall a frame — so a thread fetches the table now and then
and the loop only reads the last one.
"""

from __future__ import annotations

import threading
from typing import Any

from brawlkit.registry.client import RegistryClient, RegistryError

#: re-read the table this often (s): ratings move with every stored match
REFRESH_S = 60.0


class RatingBoard:
    """The registry's ratings by id; :meth:`lookup` never blocks."""

    def __init__(self, url: str | None, refresh_s: float = REFRESH_S) -> None:
        self.table: dict[str, float] = {}
        self.problem: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if url:
            self._thread = threading.Thread(target=self._run, args=(url, refresh_s),
                                            name="play-ratings", daemon=True)
            self._thread.start()

    def _run(self, url: str, refresh_s: float) -> None:

        try:
            client = RegistryClient(url, retries=1)
        except RegistryError as e:
            self.problem = str(e)
            return
        while not self._stop.is_set():
            try:
                self.set_table(client.ratings())
            except RegistryError as e:  # no credentials, no read scope, down: just no ratings
                self.problem = str(e)
                if e.status is not None or "credentials" in str(e):
                    return  # asking again will not help
            self._stop.wait(refresh_s)

    def set_table(self, body: dict[str, Any]) -> None:
        self.table = {str(m["id"]): float(m["rating"]) for m in body.get("members", [])}

    def lookup(self, name: str) -> str | None:
        """The rating of the PEER name ``name`` (a member id, a player's NAME, ``cpu:L``),
        rounded for display, or None when the table has none."""
        for key in (name, f"player:{name}"):
            if key in self.table:
                return f"{self.table[key]:.0f}"
        return None

    def close(self) -> None:
        self._stop.set()
