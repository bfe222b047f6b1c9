"""Match replays (``.bpr``): read, write, re-simulate, verify, render.

``brawlpit_server --record DIR`` writes one file per match; docs/replays.md
describes the format and the determinism guarantee.  Light imports only here
(numpy, ctypes): rendering (matplotlib) lives in :mod:`brawlkit.replay.render`.
"""

from brawlkit.replay.format import Replay, read_replay, write_replay
from brawlkit.replay.play import (
    Recorder,
    ReplayMismatch,
    TickState,
    record_cpu_match,
    replay_players,
    replay_states,
    verify,
)

__all__ = [
    "Recorder",
    "Replay",
    "ReplayMismatch",
    "TickState",
    "read_replay",
    "record_cpu_match",
    "replay_players",
    "replay_states",
    "verify",
    "write_replay",
]
