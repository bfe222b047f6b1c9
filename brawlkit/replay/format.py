"""The ``.bpr`` replay file: ctypes mirrors of the C structs, a reader and a writer.

Why a file of inputs and not of states: the simulation is deterministic (same
seed, same inputs => bit-identical state), so a match is fully described by its
seed, match id and the two input streams.  The server (``brawlpit_server
--record DIR``) writes one file per match; Python writes the same format from
an in-process match (:func:`brawlkit.replay.play.record_cpu_match`).  The final
``bp_sim_state_hash`` and the final ``NetPlayer[2]`` are stored too, so a
replay proves itself: :func:`brawlkit.replay.play.verify` re-simulates and
compares bit for bit.

Layout (little-endian, packed; ``native/include/brawlpit.h`` declares the C
structs, ``docs/replays.md`` documents every field)::

    BpReplayHeader (128 bytes)
    BpReplayRun    (28 bytes) x n_runs      -- `count` ticks with the same inputs
    NetPlayer      (32 bytes) x 2           -- the players after the last tick

The reader refuses anything it cannot vouch for (wrong magic, version, sizes,
run counts that disagree with ``n_ticks``, non-finite inputs) with a
``ValueError`` naming the file and the problem, so a corrupt or foreign file
never reaches the simulation.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from brawlkit.common.io import atomic_write_bytes
from brawlkit.wire.constants import MODE_IDS, C
from brawlkit.wire.mirrors import mirror
from brawlkit.wire.protocol import NetPlayer, PlayerState

_LE = ctypes.LittleEndianStructure


#: the file's first 4 bytes, "BPRP" (the header declares it as a little-endian u32,
#: since every BP_ define is numeric)
REPLAY_MAGIC: bytes = int(C.BP_REPLAY_MAGIC).to_bytes(4, "little")
REPLAY_VERSION: int = int(C.BP_REPLAY_VERSION)
NAME_LEN: int = int(C.BP_NAME_LEN)


@mirror("BpReplayHeader")
class BpReplayHeader(_LE):
    """A ``.bpr`` file's 128-byte header (native/include/brawlpit.h)."""


@mirror("BpReplayRun")
class BpReplayRun(_LE):
    """``count`` consecutive ticks with the same inputs of both slots."""


HEADER_SIZE = ctypes.sizeof(BpReplayHeader)
RUN_SIZE = ctypes.sizeof(BpReplayRun)
PLAYERS_SIZE = 2 * ctypes.sizeof(NetPlayer)
assert HEADER_SIZE == C.BP_REPLAY_HEADER_SIZE, (
    f"BpReplayHeader mirror is {HEADER_SIZE} bytes, brawlpit.h says {C.BP_REPLAY_HEADER_SIZE}")
assert RUN_SIZE == 28, f"BpReplayRun is {RUN_SIZE} bytes, the format says 28"

#: numpy view of the runs (derived from the mirror, so one declaration of the layout)
RUN_DTYPE = np.dtype(BpReplayRun).newbyteorder("<")
#: numpy view of NetPlayer, for per-tick player arrays
PLAYER_DTYPE = np.dtype(NetPlayer).newbyteorder("<")
assert RUN_DTYPE.itemsize == RUN_SIZE and PLAYER_DTYPE.itemsize == ctypes.sizeof(NetPlayer)

_WINNERS = (0, 1, C.BP_WINNER_DRAW, C.BP_WINNER_NONE)


def empty_runs(n: int = 0) -> np.ndarray:
    """A zeroed run array of ``n`` runs (the dtype the reader returns)."""
    return np.zeros(n, dtype=RUN_DTYPE)


@dataclass(frozen=True, eq=False)
class Replay:
    """One recorded match: everything needed to re-simulate it and check the result.

    ``runs`` is a structured array (:data:`RUN_DTYPE`: count, sx0, sy0, buttons0,
    sx1, sy1, buttons1); ``players_raw`` the 64 bytes of the final ``NetPlayer[2]``
    (compared byte for byte by :func:`brawlkit.replay.play.verify`).
    """

    seed: int
    match_id: int
    runs: np.ndarray
    final_hash: int
    players_raw: bytes
    arena_id: int = 0
    mode: int = C.BP_MODE_LOCKSTEP
    cpu_level: int = 0
    complete: bool = True
    winner: int = C.BP_WINNER_NONE
    start_unix_ms: int = 0
    names: tuple[str, str] = ("", "")
    version: int = REPLAY_VERSION
    path: Path | None = field(default=None, compare=False)

    @property
    def n_ticks(self) -> int:
        """Ticks simulated (the sum of the run counts)."""
        return int(self.runs["count"].sum(dtype=np.uint64)) if len(self.runs) else 0

    @property
    def n_runs(self) -> int:
        return len(self.runs)

    @property
    def final_players(self) -> tuple[PlayerState, PlayerState]:
        """The two fighters after the last tick, decoded."""
        arr = np.frombuffer(self.players_raw, dtype=PLAYER_DTYPE, count=2)
        a, b = (PlayerState(*(v.item() for v in rec)) for rec in arr)
        return a, b

    def inputs(self) -> np.ndarray:
        """Per-tick inputs, shape (n_ticks, 2, 3) float64: stick x, stick y, buttons."""
        r = self.runs
        per_run = np.stack([np.stack([r["sx0"], r["sy0"], r["buttons0"]], axis=-1),
                            np.stack([r["sx1"], r["sy1"], r["buttons1"]], axis=-1)], axis=1)
        return np.repeat(per_run.astype(np.float64), r["count"].astype(np.int64), axis=0)

    def describe(self) -> str:
        """One line: who played, how it ended, how long."""
        where = f"arena {self.arena_id} " if self.arena_id else ""
        secs = self.n_ticks / C.BP_TICK_HZ
        return (f"{where}match {self.match_id} seed {self.seed}: {self.names[0] or 'slot 0'} vs "
                f"{self.names[1] or 'slot 1'}, {self.n_ticks} ticks ({secs:.1f} s), "
                f"{result_text(self)}")


# ----------------------------------------------------------------- encoding
def _name_bytes(name: str, which: str) -> bytes:
    raw = name.encode("ascii", errors="strict") if name.isascii() else None
    if raw is None or any(b < 0x20 or b > 0x7E for b in raw):
        raise ValueError(f"{which} {name!r}: names are printable ASCII (0x20..0x7e)")
    if len(raw) > NAME_LEN:
        raise ValueError(f"{which} {name!r}: longer than {NAME_LEN} bytes")
    return raw


def _check_runs(runs: np.ndarray, where: str) -> None:
    if runs.dtype != RUN_DTYPE:
        raise ValueError(f"{where}: runs must have dtype RUN_DTYPE, got {runs.dtype}")
    if len(runs) and int(runs["count"].min()) == 0:
        i = int(np.argmin(runs["count"]))
        raise ValueError(f"{where}: run {i} has count 0 (every run covers at least one tick)")
    for f in ("sx0", "sy0", "sx1", "sy1"):
        bad = ~np.isfinite(runs[f])
        if bad.any():
            raise ValueError(f"{where}: run {int(np.argmax(bad))} has a non-finite {f}")


def encode_replay(replay: Replay) -> bytes:
    """The file bytes of ``replay`` (validated the way the reader validates)."""
    where = str(replay.path) if replay.path else "replay"
    runs = np.ascontiguousarray(replay.runs, dtype=RUN_DTYPE)
    _check_runs(runs, where)
    if len(replay.players_raw) != PLAYERS_SIZE:
        raise ValueError(f"{where}: players_raw is {len(replay.players_raw)} bytes, not {PLAYERS_SIZE}")
    n_ticks = replay.n_ticks
    if n_ticks > C.BP_MATCH_TICKS:
        raise ValueError(f"{where}: {n_ticks} ticks, a match has at most {C.BP_MATCH_TICKS}")
    h = BpReplayHeader()
    h.magic = REPLAY_MAGIC
    h.version = REPLAY_VERSION
    h.header_size = HEADER_SIZE
    h.seed, h.match_id, h.arena_id = replay.seed, replay.match_id, replay.arena_id
    h.mode, h.cpu_level = replay.mode, replay.cpu_level
    h.complete, h.winner = int(bool(replay.complete)), replay.winner
    h.n_ticks = n_ticks
    h.final_hash = replay.final_hash
    h.start_unix_ms = replay.start_unix_ms
    h.name0 = _name_bytes(replay.names[0], "name0")
    h.name1 = _name_bytes(replay.names[1], "name1")
    h.n_runs = len(runs)
    return bytes(h) + runs.tobytes() + replay.players_raw


def write_replay(path: str | os.PathLike[str], replay: Replay) -> Path:
    """Write ``replay`` to ``path`` atomically (temp file + rename: never a half file)."""
    return atomic_write_bytes(path, encode_replay(replay))


# ----------------------------------------------------------------- decoding
def _decode_name(raw: bytes, which: str, where: str) -> str:
    text = raw.rstrip(b"\0")
    if b"\0" in text or any(b < 0x20 or b > 0x7E for b in text):
        raise ValueError(f"{where}: {which} is not NUL-padded printable ASCII: {raw!r}")
    return text.decode("ascii")


def _field_bytes(data: bytes, name: str) -> bytes:
    desc = getattr(BpReplayHeader, name)
    return bytes(data[desc.offset:desc.offset + desc.size])


def decode_replay(data: bytes, source: str = "replay") -> Replay:
    """Parse and validate the bytes of a ``.bpr`` file (``source`` names it in errors)."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"{source}: truncated: {len(data)} bytes, a replay header is {HEADER_SIZE}")
    h = BpReplayHeader.from_buffer_copy(data, 0)
    magic = bytes(data[:4])
    if magic != REPLAY_MAGIC:
        raise ValueError(f"{source}: bad magic {magic!r} (expected {REPLAY_MAGIC!r}): "
                         "not a BRAWLPIT replay")
    if h.version != REPLAY_VERSION:
        raise ValueError(f"{source}: replay version {h.version}, this reader reads version "
                         f"{REPLAY_VERSION}")
    if h.header_size != HEADER_SIZE:
        raise ValueError(f"{source}: header_size {h.header_size}, version {REPLAY_VERSION} has "
                         f"{HEADER_SIZE}")
    expected = HEADER_SIZE + h.n_runs * RUN_SIZE + PLAYERS_SIZE
    if len(data) < expected:
        raise ValueError(f"{source}: truncated: {len(data)} bytes, {h.n_runs} runs need {expected}")
    if len(data) > expected:
        raise ValueError(f"{source}: {len(data) - expected} trailing bytes after the final players "
                         f"({h.n_runs} runs make {expected} bytes)")
    if h.mode not in MODE_IDS.values():
        raise ValueError(f"{source}: unknown mode {h.mode}")
    if h.cpu_level > C.BP_CPU_LEVEL_MAX:
        raise ValueError(f"{source}: cpu_level {h.cpu_level} outside 0..{C.BP_CPU_LEVEL_MAX}")
    if h.complete not in (0, 1):
        raise ValueError(f"{source}: complete is {h.complete}, not 0 or 1")
    if h.winner not in _WINNERS:
        raise ValueError(f"{source}: winner {h.winner} is not a BP_WINNER_* value")
    runs = np.frombuffer(data, dtype=RUN_DTYPE, count=h.n_runs, offset=HEADER_SIZE).copy()
    _check_runs(runs, source)
    total = int(runs["count"].sum(dtype=np.uint64)) if len(runs) else 0
    if total != h.n_ticks:
        raise ValueError(f"{source}: the runs cover {total} ticks, the header says n_ticks "
                         f"{h.n_ticks}")
    if h.n_ticks > C.BP_MATCH_TICKS:
        raise ValueError(f"{source}: n_ticks {h.n_ticks} exceeds a match ({C.BP_MATCH_TICKS})")
    # raw slices: a ctypes char-array field stops at the first NUL and would hide junk after it
    names = (_decode_name(_field_bytes(data, "name0"), "name0", source),
             _decode_name(_field_bytes(data, "name1"), "name1", source))
    return Replay(seed=h.seed, match_id=h.match_id, runs=runs, final_hash=h.final_hash,
                  players_raw=bytes(data[expected - PLAYERS_SIZE:]), arena_id=h.arena_id,
                  mode=h.mode, cpu_level=h.cpu_level, complete=bool(h.complete), winner=h.winner,
                  start_unix_ms=h.start_unix_ms, names=names, version=h.version)


def read_replay(path: str | os.PathLike[str]) -> Replay:
    """Read and validate a ``.bpr`` file; ``ValueError`` names the file and what is wrong."""
    p = Path(path)
    data = p.read_bytes()
    return dataclasses.replace(decode_replay(data, str(p)), path=p)


def unix_ms() -> int:
    """Now, in milliseconds since the epoch (what ``start_unix_ms`` holds)."""
    return time.time_ns() // 1_000_000


def replay_filename(replay: Replay) -> str:
    """The server's file name for a replay: ``<start_unix_ms>-a<arena_id>-m<match_id>.bpr``."""
    return f"{replay.start_unix_ms}-a{replay.arena_id}-m{replay.match_id}.bpr"


def result_text(replay: Replay) -> str:
    """How the match ended, in words ("cpu:3 wins", "draw", "cut short after 12.3 s")."""
    if not replay.complete:
        return f"cut short after {replay.n_ticks / C.BP_TICK_HZ:.1f} s"
    if replay.winner == C.BP_WINNER_DRAW:
        return "draw"
    if replay.winner in (0, 1):
        return f"{replay.names[replay.winner] or f'slot {replay.winner}'} wins"
    return "no winner"
