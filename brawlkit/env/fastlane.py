"""The vec env's fast lane: a vector step in C (``native/src/vecstep.c``).

Why: on a 2-core machine the trainer's own Python per env step — decode the action,
pack and send the CMD, wait for and parse the SNAPSHOT, build the 79-value policy
input — cost PPO more than the server's simulation (docs/benchmarks.md).  The lane
hands all of it but the reward and the info to ``libbrawlvec.so``: one ``bpv_send``
sends every env's CMD (and every callable opponent's), and each ``bpv_ready`` takes the
answers that are in, each with its policy input built by ``obs.c`` — the C twin the
native bot plays with, bit-identical to :func:`brawlkit.env.observation.build_input`
(parity-tested) — so Python works on one env's answer while the server ticks the next.

What stays in Python, unchanged: the reward object and the info dict (pluggable,
stateful), the reset (HELLO, RESET with its nonce), the opponent callables, and every
unhappy path.  An env enters the lane lazily on the first step after a reset when it
is eligible (:attr:`BrawlpitEnv.lane_ok`: lockstep, no input delay, the lane's
``action_repeat`` and input layout); from then on the lane owns its clients' sequence
numbers, and any Python-side operation on the env (``reset``, ``step_send``,
``close``) first hands them back (:meth:`FastLane.release`).  A step the lane could
not finish within :data:`BUDGET_US` (a lost datagram, a dead server) is finished by
the env's own receive loop, which re-sends the CMD the lane sent, checks the server
is alive and raises :class:`~brawlkit.env.brawlpit.EnvError` with context.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np

from brawlkit.common.paths import native_path
from brawlkit.env.actions import ACT_DIM
from brawlkit.env.brawlpit import BrawlpitEnv
from brawlkit.env.observation import INPUT_LAYOUTS
from brawlkit.env.udp_client import RESEND_S
from brawlkit.wire import protocol as P
from brawlkit.wire.mirrors import mirror
from brawlkit.wire.protocol import SNAPSHOT_SIZE, Snapshot

#: how long one lane call waits for answers before Python's loop takes over (µs): the
#: re-send interval of that loop, so a lost datagram costs what it always did
BUDGET_US = int(RESEND_S * 1e6)

BPV_DONE, BPV_PENDING, BPV_ERR_RECV, BPV_IDLE = 0, 1, 2, 3
CMD_SIZE = ctypes.sizeof(P.NetHeader) + ctypes.sizeof(P.UserCmd)


@mirror("BpCommand", "src/obs.h")
class BpCommand(ctypes.Structure):
    """The command a player sent last step, as input layout 2 feeds it back (obs.h)."""


@mirror("BpvClient", "src/obs.h", "src/vecstep.h")
class BpvClient(ctypes.Structure):
    """One lane client's state (native/src/vecstep.h; natural alignment, not packed —
    :func:`lib` checks the size against C's, a test every offset)."""


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """Load libbrawlvec.so once (a missing build names ``make build``)."""
    so = ctypes.CDLL(str(native_path("libbrawlvec.so")))
    so.bpv_client_size.restype = ctypes.c_uint32
    so.bpv_step.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                            ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
    so.bpv_step.restype = ctypes.c_int
    so.bpv_send.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32]
    so.bpv_send.restype = None
    so.bpv_ready.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    so.bpv_ready.restype = ctypes.c_int
    so.bpv_inputs.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_int, ctypes.c_void_p]
    so.bpv_inputs.restype = ctypes.c_int
    if so.bpv_client_size() != ctypes.sizeof(BpvClient):
        raise ImportError(f"libbrawlvec.so's BpvClient is {so.bpv_client_size()} bytes, the mirror in "
                          f"brawlkit/env/fastlane.py {ctypes.sizeof(BpvClient)}: rebuild with `make build`")
    return so


def build_inputs(snaps: bytes, slots: np.ndarray, prev: ctypes.Array[BpCommand], layout: int,
                 out: np.ndarray) -> None:
    """Policy inputs of ``layout`` for ``len(slots)`` SNAPSHOTs laid end to end, built in C
    in one call (what the lane builds; ``bench env``'s in-process reference uses it so both
    sides of its comparison build inputs the same way).  ``slots`` int32, ``out`` float32
    (n, dim); a refused snapshot raises ValueError."""
    n = len(slots)
    if len(snaps) != n * SNAPSHOT_SIZE or out.shape != (n, INPUT_LAYOUTS[layout]) \
            or slots.dtype != np.int32 or out.dtype != np.float32 or len(prev) < n:
        raise ValueError("build_inputs: snaps must hold len(slots) snapshots, out (n, dim) float32")
    bad = lib().bpv_inputs(snaps, n, slots.ctypes.data, ctypes.addressof(prev), layout, out.ctypes.data)
    if bad:
        raise ValueError(f"build_inputs: {bad} of {n} snapshots refused (malformed or non-finite)")


class FastLane:
    """Clients of ``n_envs`` envs for ``bpv_send`` / ``bpv_ready``: row ``2*i`` is env *i*'s own client,
    row ``2*i+1`` its callable opponent's (inactive without one).

    Args:
        n_envs: envs of the vec env.
        action_repeat, input_layout: what every env in the lane uses (an env with other
            values stays on the Python path).
        spin_us: how long ``bpv_ready`` busy-polls before it sleeps in ``poll``.
    """

    def __init__(self, n_envs: int, action_repeat: int, input_layout: int, spin_us: float = 200.0):
        self._lib = lib()
        if input_layout not in INPUT_LAYOUTS:
            raise ValueError(f"input_layout {input_layout} unknown; known: {sorted(INPUT_LAYOUTS)}")
        self.n_envs = n_envs
        self.action_repeat = int(action_repeat)
        self.input_layout = int(input_layout)
        self.dim = INPUT_LAYOUTS[self.input_layout]
        self.spin_us = int(spin_us)
        self.clients = (BpvClient * (2 * n_envs))()
        self._base = ctypes.addressof(self.clients)
        self._size = ctypes.sizeof(BpvClient)
        self._snap_off = BpvClient.snap.offset
        self.actions = np.zeros((2 * n_envs, ACT_DIM), np.float32)
        self.inputs = np.zeros((2 * n_envs, self.dim), np.float32)
        self._rows = np.zeros(2 * n_envs, np.int32)
        self._need = [0] * n_envs
        self.loaded = [False] * n_envs
        self._stepped = [False] * n_envs
        #: vector steps the lane ran, and env steps it handed back to Python's loop
        self.steps = 0
        self.fallbacks = 0

    # ------------------------------------------------------------- entering and leaving
    def admit(self, i: int, env: BrawlpitEnv) -> bool:
        """Load env ``i``'s clients if it can step in the lane now; whether it is in."""
        if self.loaded[i]:
            return True
        if not (env.lane_ok and env.action_repeat == self.action_repeat
                and env.input_layout == self.input_layout):
            return False
        me, op, snap = env._me, env._op, env._snap
        assert me is not None and snap is not None
        for row, client in ((2 * i, me), (2 * i + 1, op)):
            c = self.clients[row]
            if client is None:
                c.active = 0
                continue
            c.active, c.fd, c.session, c.slot = 1, client.fd, client.session, client.slot
            c.seq, c.cmd_seq = client.seq & 0xFFFFFFFF, client.cmd_seq & 0xFFFFFFFF
            c.match_id, c.tick = snap.match_id, snap.tick
        if op is not None:  # the opponent acts on its own view of the current state
            self.inputs[2 * i + 1] = env._observe(snap, 1)
        self.loaded[i] = True
        self._stepped[i] = False
        env._lane_exit = functools.partial(self.release, i, env)
        return True

    def release(self, i: int, env: BrawlpitEnv) -> None:
        """Hand env ``i``'s sequence numbers, last commands and re-send packets back to
        its Python clients (before anything Python-side talks to its server)."""
        if not self.loaded[i]:
            return
        self.loaded[i] = False
        env._lane_exit = None
        self.clients[2 * i].active = self.clients[2 * i + 1].active = 0
        if not self._stepped[i]:
            return
        for slot, (row, client) in enumerate(((2 * i, env._me), (2 * i + 1, env._op))):
            if client is None:
                continue
            c = self.clients[row]
            client.seq, client.cmd_seq = c.seq, c.cmd_seq
            client.last_cmds = [bytes(c.cmd_pkt)]
            env._prev[slot] = (c.cmd.stick_x, c.cmd.stick_y, int(c.cmd.buttons))

    # ------------------------------------------------------------- one vector step
    def step(self, envs: list[Any], lane_idx: list[int], actions: np.ndarray
             ) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Send the commands of envs ``lane_idx`` (and their opponents'), then yield
        ``(i, env i's gym 5-tuple)`` as the answers come in — env *i*'s reward and info
        are computed while the server still ticks the others' arenas."""
        acts = self.actions
        acts[0::2] = actions
        need = self._need  # answers each env waits for: its own, and its opponent client's
        for i in lane_idx:
            self._stepped[i] = True
            op_fn = envs[i]._op_fn
            need[i] = 1
            if op_fn is not None:  # its own array, as the Python path gives it (one may keep it)
                acts[2 * i + 1] = op_fn(self.inputs[2 * i + 1].copy())
                need[i] = 2
        lib, base, n, clients = self._lib, self._base, 2 * self.n_envs, self.clients
        lib.bpv_send(base, n, acts.ctypes.data, self.action_repeat)
        self.steps += 1
        layout, inputs, spin = self.input_layout, self.inputs.ctypes.data, self.spin_us
        rows, rows_ptr = self._rows, self._rows.ctypes.data
        left = len(lane_idx)
        while left:
            k = lib.bpv_ready(base, n, layout, inputs, spin, BUDGET_US, rows_ptr)
            if k < 0:
                break
            for row in rows[:k].tolist():
                i = row >> 1
                need[i] -= 1
                if need[i]:
                    continue  # the env's other client (its callable opponent's) still waits
                left -= 1
                yield i, envs[i]._lane_result(P.snapshot_from_checked(self._answer(i)),
                                              actions[i], self.inputs[2 * i].copy())
        if left:  # an answer did not come in time: those envs' own loops finish them
            for i in lane_idx:
                if BPV_PENDING in (clients[2 * i].status, clients[2 * i + 1].status):
                    yield i, self._fallback(i, envs[i], actions[i])

    def _answer(self, i: int) -> bytes:
        """The SNAPSHOT bytes that answered env ``i``'s step (its own client's ``snap``)."""
        return ctypes.string_at(self._base + 2 * i * self._size + self._snap_off, SNAPSHOT_SIZE)

    def _fallback(self, i: int, env: BrawlpitEnv, action: np.ndarray) -> tuple[Any, ...]:
        self.fallbacks += 1
        me, op = self.clients[2 * i], self.clients[2 * i + 1]
        cur: Snapshot | None = None
        if me.status == BPV_DONE:
            cur = P.snapshot_from_checked(self._answer(i))
        op_done = op.status == BPV_DONE
        self.release(i, env)
        return env._lane_fallback(cur, op_done, action)
