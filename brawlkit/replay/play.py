"""Re-simulate a replay in process, prove it, and record new ones.

Why in process: the C simulation in ``libbrawlpit.so`` is the same code the
server runs, deterministic to the bit, so stepping it with the recorded inputs
reproduces every tick of a server match without a server.  :func:`verify`
turns that into a check: the state hash and both fighters after the last tick
must equal what the recorder stored, or the replay (or the simulation) is not
what it claims to be.

:class:`Recorder` writes the same format from Python (any input source), and
:func:`record_cpu_match` uses it for a CPU-vs-CPU match: replays for tests and
notebooks with no server at all.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from brawlkit.common.io import Closing
from brawlkit.replay.format import (
    PLAYER_DTYPE,
    PLAYERS_SIZE,
    RUN_DTYPE,
    Replay,
    empty_runs,
    unix_ms,
    write_replay,
)
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import NetPlayer, PlayerState
from brawlkit.wire.sim import BpInput, lib


class TickState(NamedTuple):
    """The match after ``tick`` ticks (tick 0 = right after the reset)."""

    tick: int
    ticks_left: int
    phase: int
    winner: int
    players: tuple[PlayerState, PlayerState]


class ReplayMismatch(ValueError):
    """Re-simulating a replay did not give the recorded result."""


def _sanitizer() -> Any:
    so = lib()
    fn = so.bp_input_sanitize
    fn.argtypes = [BpInput]
    fn.restype = BpInput
    return fn


class _Sim(Closing):
    """One ``BpSim``, reset to (seed, match_id), destroyed on close."""

    def __init__(self, seed: int, match_id: int) -> None:
        self.lib = lib()
        self.ptr = self.lib.bp_sim_create()
        if not self.ptr:
            raise MemoryError("bp_sim_create failed")
        self.lib.bp_sim_reset(self.ptr, seed, match_id)
        self._players = (NetPlayer * 2)()

    def step(self, inputs: Any) -> None:
        self.lib.bp_sim_step(self.ptr, inputs)

    def players_raw(self) -> bytes:
        self.lib.bp_sim_players(self.ptr, self._players)
        return bytes(self._players)

    def state(self) -> TickState:
        self.lib.bp_sim_players(self.ptr, self._players)
        p0, p1 = (PlayerState(*(getattr(p, f) for f, *_ in NetPlayer._fields_))
                  for p in self._players)
        return TickState(int(self.lib.bp_sim_tick(self.ptr)), int(self.lib.bp_sim_ticks_left(self.ptr)),
                         int(self.lib.bp_sim_phase(self.ptr)), int(self.lib.bp_sim_winner(self.ptr)),
                         (p0, p1))

    def tick(self) -> int:
        return int(self.lib.bp_sim_tick(self.ptr))

    def phase(self) -> int:
        return int(self.lib.bp_sim_phase(self.ptr))

    def winner(self) -> int:
        return int(self.lib.bp_sim_winner(self.ptr))

    def state_hash(self) -> int:
        return int(self.lib.bp_sim_state_hash(self.ptr))

    def close(self) -> None:
        if self.ptr:
            self.lib.bp_sim_destroy(self.ptr)
            self.ptr = None


def _run_inputs(run: np.void) -> Any:
    arr = (BpInput * 2)()
    arr[0].stick_x, arr[0].stick_y, arr[0].buttons = float(run["sx0"]), float(run["sy0"]), int(run["buttons0"])
    arr[1].stick_x, arr[1].stick_y, arr[1].buttons = float(run["sx1"]), float(run["sy1"]), int(run["buttons1"])
    return arr


def _ticks(replay: Replay, sim: _Sim) -> Iterator[int]:
    """Step ``sim`` through every recorded tick, yielding the tick count after each."""
    t = 0
    for run in replay.runs:
        inputs = _run_inputs(run)
        for _ in range(int(run["count"])):
            sim.step(inputs)
            t += 1
            yield t


def _simulate(replay: Replay, sim: _Sim, every: int) -> Iterator[TickState]:
    """Step ``sim`` through ``replay``; yield the state at tick 0, every ``every``-th
    tick and the last tick."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    n = replay.n_ticks
    yield sim.state()
    for t in _ticks(replay, sim):
        if t % every == 0 or t == n:
            yield sim.state()


def frame_ticks(n_ticks: int, every: int) -> list[int]:
    """The ticks :func:`replay_states` yields: 0, every, 2*every, ... and ``n_ticks``."""
    ticks = list(range(0, n_ticks + 1, every))
    if ticks[-1] != n_ticks:
        ticks.append(n_ticks)
    return ticks


def replay_states(replay: Replay, every: int = 1) -> Iterator[TickState]:
    """The match re-simulated: its state after tick 0, ``every``, ``2*every``, ... and
    after the last tick (see :func:`frame_ticks`).  Lazy: a full match at every=1 is
    9,001 states, made as they are consumed."""
    with _Sim(replay.seed, replay.match_id) as sim:
        yield from _simulate(replay, sim, every)


def replay_players(replay: Replay) -> np.ndarray:
    """Both fighters at every tick: a structured array (n_ticks + 1, 2) of
    :data:`~brawlkit.replay.format.PLAYER_DTYPE` (row 0 = after the reset) —
    for plots of damage, positions, action states."""
    out = np.zeros((replay.n_ticks + 1, 2), dtype=PLAYER_DTYPE)
    with _Sim(replay.seed, replay.match_id) as sim:
        out[0] = np.frombuffer(sim.players_raw(), dtype=PLAYER_DTYPE)
        for t in _ticks(replay, sim):
            out[t] = np.frombuffer(sim.players_raw(), dtype=PLAYER_DTYPE)
    return out


class Verified(NamedTuple):
    """What :func:`verify` re-simulated and found equal to the recording."""

    n_ticks: int
    final_hash: int
    winner: int
    complete: bool


def _player_diff(expected: bytes, got: bytes) -> str:
    exp = np.frombuffer(expected, dtype=PLAYER_DTYPE)
    act = np.frombuffer(got, dtype=PLAYER_DTYPE)
    parts = []
    for i in range(2):
        for name in PLAYER_DTYPE.names or ():
            a, b = exp[i][name].item(), act[i][name].item()
            if a != b and not (a != a and b != b):  # NaN == NaN for this purpose
                parts.append(f"player {i} {name} recorded {a!r} replayed {b!r}")
    return "; ".join(parts) or "bytes differ"


def verify(replay: Replay) -> Verified:
    """Re-simulate ``replay`` and raise :class:`ReplayMismatch` unless the final state
    hash, both final fighters (byte for byte), the tick count, the phase
    (``complete``) and the winner equal the recording."""
    where = str(replay.path) if replay.path else f"match {replay.match_id}"
    with _Sim(replay.seed, replay.match_id) as sim:
        for _ in _simulate(replay, sim, every=replay.n_ticks or 1):
            pass
        problems = []
        if sim.tick() != replay.n_ticks:
            problems.append(f"the match ended after {sim.tick()} ticks but the replay has "
                            f"{replay.n_ticks}")
        got_hash = sim.state_hash()
        if got_hash != replay.final_hash:
            problems.append(f"final state hash {got_hash:#018x}, recorded {replay.final_hash:#018x}")
        raw = sim.players_raw()
        if raw != replay.players_raw:
            problems.append("final players differ: " + _player_diff(replay.players_raw, raw))
        over = sim.phase() == C.BP_PHASE_OVER
        if over != replay.complete:
            problems.append(f"phase {'over' if over else 'playing'} at the end, recorded "
                            f"complete={int(replay.complete)}")
        if sim.winner() != replay.winner:
            problems.append(f"winner {sim.winner()}, recorded {replay.winner}")
    if problems:
        raise ReplayMismatch(f"{where}: replay does not reproduce: " + "; ".join(problems))
    return Verified(replay.n_ticks, got_hash, replay.winner, replay.complete)


# ----------------------------------------------------------------- recording
class Recorder(Closing):
    """Step a fresh simulation with any inputs and record them as a :class:`Replay`.

    Inputs are sanitised by the simulation's own ``bp_input_sanitize`` before they
    are applied and recorded, so the file holds exactly what the simulation used
    (as the server records post-clamp inputs).  ``sim_ptr`` is the ``BpSim*`` for
    ``bp_cpu_think``.
    """

    def __init__(self, seed: int, match_id: int = 1, *, names: tuple[str, str] = ("", ""),
                 cpu_level: int = 0, mode: int = C.BP_MODE_LOCKSTEP, arena_id: int = 0) -> None:
        self._sim = _Sim(seed, match_id)
        self._sanitize = _sanitizer()
        self._inputs = (BpInput * 2)()
        self._runs: list[list[Any]] = []
        self._template = Replay(seed=seed, match_id=match_id, runs=empty_runs(), final_hash=0,
                                players_raw=bytes(PLAYERS_SIZE), arena_id=arena_id, mode=mode,
                                cpu_level=cpu_level, names=names, start_unix_ms=unix_ms())

    @property
    def sim_ptr(self) -> Any:
        return self._sim.ptr

    @property
    def over(self) -> bool:
        return self._sim.phase() == C.BP_PHASE_OVER

    @property
    def tick(self) -> int:
        return self._sim.tick()

    def state(self) -> TickState:
        return self._sim.state()

    def step(self, in0: BpInput, in1: BpInput) -> None:
        """Apply one tick (a no-op once the match is over: nothing is recorded then)."""
        if self.over:
            return
        a, b = self._sanitize(in0), self._sanitize(in1)
        self._inputs[0], self._inputs[1] = a, b
        self._sim.step(self._inputs)
        key = (a.stick_x, a.stick_y, a.buttons, b.stick_x, b.stick_y, b.buttons)
        if self._runs and tuple(self._runs[-1][1:]) == key:
            self._runs[-1][0] += 1
        else:
            self._runs.append([1, *key])

    def finish(self) -> Replay:
        """The recording so far as a :class:`Replay` (the sim stays usable)."""
        runs = np.array([tuple(r) for r in self._runs], dtype=RUN_DTYPE)
        return dataclasses.replace(self._template, runs=runs, final_hash=self._sim.state_hash(),
                                   players_raw=self._sim.players_raw(), complete=self.over,
                                   winner=self._sim.winner())

    def close(self) -> None:
        self._sim.close()


def record_cpu_match(path: str | os.PathLike[str] | None, level0: int, level1: int, seed: int,
                     *, match_id: int = 1, max_ticks: int | None = None) -> Replay:
    """Play CPU(level0) vs CPU(level1) in process and record it (to ``path`` unless None).

    Slot 1's CPU is seeded as the server seeds its CPU (``bp_cpu_match_seed(seed)``);
    slot 0's from the same seed, differently.  ``max_ticks`` cuts the match short
    (``complete`` = 0), as the server records a match ended by a RESET.
    """
    so = lib()
    cpu_seed = int(so.bp_cpu_match_seed(seed))
    cpus = [so.bp_cpu_create(level0, cpu_seed ^ 0x5A5A5A5A), so.bp_cpu_create(level1, cpu_seed)]
    try:
        for lvl, cpu in zip((level0, level1), cpus, strict=True):
            if not cpu:
                raise ValueError(f"CPU level must be in {C.BP_CPU_LEVEL_MIN}..{C.BP_CPU_LEVEL_MAX}, "
                                 f"got {lvl}")
        limit = C.BP_MATCH_TICKS if max_ticks is None else max_ticks
        with Recorder(seed, match_id, names=(f"cpu:{level0}", f"cpu:{level1}"),
                      cpu_level=level1) as rec:
            while not rec.over and rec.tick < limit:
                in0 = so.bp_cpu_think(cpus[0], rec.sim_ptr, 0)
                in1 = so.bp_cpu_think(cpus[1], rec.sim_ptr, 1)
                rec.step(in0, in1)
            replay = rec.finish()
    finally:
        for cpu in cpus:
            if cpu:
                so.bp_cpu_destroy(cpu)
    if path is not None:
        write_replay(path, replay)
        replay = dataclasses.replace(replay, path=Path(path))
    return replay
