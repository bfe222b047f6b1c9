"""What a bot pool run is asked to do (:class:`Options`, the CLI's flags), and the
bounds both kinds of match are held to.

Pairing, seats and the loop all read these; they live below all three so that none
of them has to import another for a setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brawlkit.wire.constants import C

#: a bot that has not printed its arena this long after its start has failed
JOIN_TIMEOUT_S = 15.0
#: how long the creator's result may lag behind its partner's clean exit
RESULT_GRACE_S = 5.0


def hang_bound(mode: str, speed: float) -> float:
    """Seconds after both bots joined within which a match must report its result:
    three times the match's nominal length at this pace plus 30 s of slack (1.5× for
    realtime, whose pace is exact); unpaced fastforward (speed 0) has no nominal
    length, so a fixed 120 s (a full match takes well under 10 s there)."""
    ticks, hz = C.BP_MATCH_TICKS, C.BP_TICK_HZ
    if mode == "realtime":
        return ticks / hz * 1.5 + 30.0
    if speed > 0:
        return ticks / (hz * speed) * 3.0 + 30.0
    return 120.0


@dataclass
class Options:
    """One field per flag of ``python -m brawlkit botpool`` (cli.py checks the ranges)."""

    league_dir: Path | None = None
    registry: str | None = None
    pairs: int = 2
    human_bots: int = 0
    human_port: int = 0
    human_host: str = "127.0.0.1"
    mode: str = "fastforward"
    speed: float = 1.0
    matches: int = 0
    refresh: float = 60.0
    replays: Path | None = None
    keep_upsets: int = 20
    seed: int | None = None
    live: bool = True
    hang_timeout: float = 0.0
    #: who the human seats play: ``active`` = the registry's active checkpoint when one
    #: is set (else every bot), ``every`` = every bot, fewest human games first
    seat_bots: str = "active"
    active_refresh: float = 5.0

    def pair_hang_s(self) -> float:
        """The bound of a bot-vs-bot match: ``--hang-timeout``, else derived from its pace."""
        return self.hang_timeout or hang_bound(self.mode, self.speed)

    def seat_hang_s(self) -> float:
        """The bound of a human match: ``--hang-timeout``, else derived from realtime."""
        return self.hang_timeout or hang_bound("realtime", 1.0)
