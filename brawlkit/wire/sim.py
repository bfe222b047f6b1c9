"""In-process access to the C simulation (``native/build/libbrawlpit.so``).

Why: benchmarks and tests need "the same simulation and observation with no
sockets" as the reference the UDP path is measured against, and the CPU level
table is cheapest computed in-process.  ``InProcessMatch.snapshot()`` returns
the exact SNAPSHOT bytes the server would send (the server writes its packets
with the same ``bp_sim_snapshot``), so the same Python observation builder
runs on both paths.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

from brawlkit.common.paths import native_path
from brawlkit.wire.constants import C
from brawlkit.wire.mirrors import mirror
from brawlkit.wire.protocol import NetPlayer


@mirror("BpInput", "src/sim.h")
class BpInput(ctypes.Structure):
    """One tick of one controller as the simulation takes it (sim.h)."""


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """Load libbrawlpit.so once, with argument types declared."""
    so = ctypes.CDLL(str(native_path("libbrawlpit.so")))
    vp = ctypes.c_void_p
    so.bp_sim_create.restype = vp
    so.bp_sim_destroy.argtypes = [vp]
    so.bp_sim_reset.argtypes = [vp, ctypes.c_uint32, ctypes.c_uint32]
    so.bp_sim_step.argtypes = [vp, ctypes.POINTER(BpInput)]
    so.bp_sim_tick.argtypes = [vp]
    so.bp_sim_tick.restype = ctypes.c_uint32
    so.bp_sim_ticks_left.argtypes = [vp]
    so.bp_sim_ticks_left.restype = ctypes.c_uint32
    so.bp_sim_phase.argtypes = [vp]
    so.bp_sim_phase.restype = ctypes.c_uint8
    so.bp_sim_winner.argtypes = [vp]
    so.bp_sim_winner.restype = ctypes.c_uint8
    so.bp_sim_players.argtypes = [vp, ctypes.POINTER(NetPlayer)]
    so.bp_sim_snapshot.argtypes = [vp, ctypes.c_uint32, ctypes.c_uint8, ctypes.c_uint8,
                                   ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]
    so.bp_sim_snapshot.restype = ctypes.c_size_t
    so.bp_cpu_create.argtypes = [ctypes.c_int, ctypes.c_uint32]
    so.bp_cpu_create.restype = vp
    so.bp_cpu_destroy.argtypes = [vp]
    so.bp_cpu_think.argtypes = [vp, vp, ctypes.c_int]
    so.bp_cpu_think.restype = BpInput
    so.bp_sim_step_cpu.argtypes = [vp, ctypes.POINTER(BpInput), vp, ctypes.c_int]
    so.bp_sim_step_cpu.restype = ctypes.c_int
    so.bp_match_cpu_vs_cpu.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint32]
    so.bp_match_cpu_vs_cpu.restype = ctypes.c_uint8
    so.bp_match_cpu_vs_cpu_ex.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_uint32,
                                          ctypes.POINTER(ctypes.c_uint32), vp]
    so.bp_match_cpu_vs_cpu_ex.restype = ctypes.c_uint8
    so.bp_sim_state_hash.argtypes = [vp]
    so.bp_sim_state_hash.restype = ctypes.c_uint64
    so.bp_cpu_match_seed.argtypes = [ctypes.c_uint32]
    so.bp_cpu_match_seed.restype = ctypes.c_uint32
    return so


class InProcessMatch:
    """A match against the built-in CPU (slot 1), stepped through ctypes."""

    def __init__(self, cpu_level: int = 3, seed: int = 0) -> None:
        self._lib = lib()
        self._sim = self._lib.bp_sim_create()
        self._cpu = self._lib.bp_cpu_create(cpu_level, seed)
        if not self._cpu:
            raise ValueError(f"cpu_level must be in 1..{C.BP_CPU_LEVEL_MAX}, got {cpu_level}")
        self._buf = ctypes.create_string_buffer(128)
        self._in = BpInput()
        self._match_id = 0
        self.reset(seed)

    def reset(self, seed: int) -> bytes:
        self._match_id += 1
        self._lib.bp_sim_reset(self._sim, seed, self._match_id)
        return self.snapshot()

    def step(self, stick_x: float, stick_y: float, buttons: int, repeat: int) -> bytes:
        """Apply one input for ``repeat`` ticks (the CPU thinks every tick)."""
        self._in.stick_x, self._in.stick_y, self._in.buttons = stick_x, stick_y, buttons
        self._lib.bp_sim_step_cpu(self._sim, ctypes.byref(self._in), self._cpu, repeat)
        return self.snapshot()

    def snapshot(self) -> bytes:
        n = self._lib.bp_sim_snapshot(self._sim, 0, 2, C.BP_MODE_LOCKSTEP, 0, self._buf, 128)
        return self._buf.raw[:n]

    @property
    def over(self) -> bool:
        return bool(self._lib.bp_sim_phase(self._sim) == C.BP_PHASE_OVER)

    def close(self) -> None:
        if self._sim:
            self._lib.bp_sim_destroy(self._sim)
            self._lib.bp_cpu_destroy(self._cpu)
            self._sim = self._cpu = None

    def __del__(self) -> None:
        self.close()


def cpu_vs_cpu(level0: int, level1: int, seed: int) -> int:
    """Winner (0, 1, or BP_WINNER_DRAW) of one full CPU-vs-CPU match."""
    return int(lib().bp_match_cpu_vs_cpu(level0, level1, seed))


def cpu_match(level0: int, level1: int, seed: int) -> tuple[int, int]:
    """(winner, ticks) of one full CPU-vs-CPU match at simulation speed: the match
    ``brawlpit_cputable`` plays (``bp_match_cpu_vs_cpu_ex``), level0 in slot 0."""
    ticks = ctypes.c_uint32()
    w = lib().bp_match_cpu_vs_cpu_ex(level0, level1, seed, ctypes.byref(ticks), None)
    return int(w), int(ticks.value)
