"""The vec env's fast lane: a vector step in C (``native/src/vecstep.c``).

Why: on a 2-core machine the trainer's own Python per env step — decode the action,
pack and send the CMD, wait for and parse the SNAPSHOT, build the 79-value policy
input — cost PPO more than the server's simulation (docs/benchmarks.md).  The lane
hands all of it but the reward and the info to ``libbrawlvec.so``: one ``bpv_send``
sends every env's CMD (and every callable opponent's) — those of one server's seats in
one BATCH datagram over a socket the lane holds per server (docs/protocol.md
"Batches") — and each ``bpv_ready`` takes the answers that are in (one BATCH_SNAP per
BATCH), each with its policy input built by ``obs.c`` — the C twin the
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
import socket
import time
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import numpy as np

from brawlkit.common.paths import native_path
from brawlkit.env.actions import ACT_DIM
from brawlkit.env.brawlpit import BrawlpitEnv
from brawlkit.env.observation import INPUT_LAYOUTS, build_input
from brawlkit.env.rewards import OutcomeReward, TieredReward, match_outcome, time_pressure_half_life
from brawlkit.env.udp_client import RESEND_S, UdpClient
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.mirrors import mirror
from brawlkit.wire.protocol import SNAPSHOT_SIZE, Snapshot

#: how long one lane call waits for answers before Python's loop takes over (µs): the
#: re-send interval of that loop, so a lost datagram costs what it always did
BUDGET_US = int(RESEND_S * 1e6)

BPV_DONE, BPV_PENDING, BPV_ERR_RECV, BPV_IDLE = 0, 1, 2, 3
CMD_SIZE = ctypes.sizeof(P.NetHeader) + ctypes.sizeof(P.UserCmd)
_OVER = int(C.BP_PHASE_OVER)


@mirror("BpCommand", "src/obs.h")
class BpCommand(ctypes.Structure):
    """The command a player sent last step, as input layout 2 feeds it back (obs.h)."""


@mirror("BpRewardState", "src/reward.h")
class BpRewardState(ctypes.Structure):
    """The tiered reward's state between steps (native/src/reward.h)."""


@mirror("BpRewardWeights", "src/reward.h")
class BpRewardWeights(ctypes.Structure):
    """:class:`~brawlkit.env.rewards.TierWeights` as the lane's C reward reads them."""


@mirror("BpvClient", "src/obs.h", "src/reward.h", "src/vecstep.h")
class BpvClient(ctypes.Structure):
    """One lane client's state (native/src/vecstep.h; natural alignment, not packed —
    :func:`lib` checks the size against C's, a test every offset)."""


@mirror("BpvBatch", "src/obs.h", "src/reward.h", "src/vecstep.h")
class BpvBatch(ctypes.Structure):
    """The lane's batching: its whole client array, items per BATCH and its counters
    (native/src/vecstep.h; docs/protocol.md "Batches")."""


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """Load libbrawlvec.so once (a missing build names ``make build``)."""
    so = ctypes.CDLL(str(native_path("libbrawlvec.so")))
    so.bpv_client_size.restype = ctypes.c_uint32
    so.bpv_step.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                            ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32,
                            ctypes.c_void_p, ctypes.c_void_p]
    so.bpv_step.restype = ctypes.c_int
    so.bpv_send.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32,
                            ctypes.c_void_p]
    so.bpv_send.restype = None
    so.bpv_ready.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                             ctypes.c_void_p]
    so.bpv_ready.restype = ctypes.c_int
    so.bpv_resend.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    so.bpv_resend.restype = ctypes.c_int
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


#: the tiers the lane's C reward computes, in its order (native/src/reward.h)
LANE_TIERS = ("outcome", "survival", "activity", "time_pressure", "streak")
#: how long a batched step keeps re-sending lost commands before it hands the envs still
#: unanswered to Python's receive loop (which checks the server and raises with context)
BATCH_PATIENCE_S = 2.0


def lane_reward(reward: Any) -> tuple[BpRewardWeights, tuple[str, ...]] | None:
    """The C weights of ``reward`` and the tier names it reports, or None when the lane
    cannot compute it (a custom reward object, the ``llm_fighting`` preset): such envs
    keep their Python reward.  :class:`TieredReward` maps one to one; the ``outcome``
    preset is its first tier with every shaping weight at zero."""
    w = BpRewardWeights()
    if type(reward) is TieredReward:
        tw = reward.w
        for name in ("damage_dealt", "damage_taken", "stock_taken", "stock_lost", "win", "loss",
                     "draw", "on_stage_per_s", "offstage_per_s", "idle_per_s", "engage_distance",
                     "time_pressure_start", "streak_unit"):
            setattr(w, name, float(getattr(tw, name)))
        w.grace_ticks = float(reward._grace_ticks)
        w.half_life = time_pressure_half_life(reward.match_ticks, tw.time_pressure_start)
        w.interval_ticks = reward._interval_ticks
        w.streak_cap_index = int(tw.streak_cap_index)
        w.match_ticks = reward.match_ticks
        return w, LANE_TIERS
    if type(reward) is OutcomeReward:
        w.damage_dealt, w.damage_taken = reward.damage_dealt, reward.damage_taken
        w.stock_taken = w.stock_lost = reward.stock
        w.win, w.loss, w.draw = reward.win, reward.loss, reward.draw
        w.half_life, w.interval_ticks, w.match_ticks = 1.0, 1, int(C.BP_MATCH_TICKS)
        return w, LANE_TIERS[:1]
    return None


def _view_dtype() -> np.dtype:
    """A numpy view of the lane's client array: the per-client fields a batched step
    reads for every arena at once (status, reward, tiers, and from the answering
    SNAPSHOT's bytes the tick, clock and phase)."""
    snap = BpvClient.snap.offset
    match = P.SnapshotPacket.match.offset
    return np.dtype({
        "names": ["status", "reward", "tiers", "tick", "ticks_left", "phase"],
        "formats": ["<i4", "<f8", ("<f8", len(LANE_TIERS)), "<u4", "<u4", "u1"],
        "offsets": [BpvClient.status.offset, BpvClient.reward.offset, BpvClient.tiers.offset,
                    snap + P.NetHeader.tick.offset,
                    snap + match + P.MatchState.ticks_left.offset,
                    snap + match + P.MatchState.phase.offset],
        "itemsize": ctypes.sizeof(BpvClient),
    })


class FastLane:
    """Clients of ``n_envs`` envs for ``bpv_send`` / ``bpv_ready``: row ``2*i`` is env *i*'s own client,
    row ``2*i+1`` its callable opponent's (inactive without one).

    Two ways to step, chosen per vector step by the vec env:

    * :meth:`step_batch` — every env is in the lane and its reward is one the lane
      computes in C (:func:`lane_reward`): one send, one wait, every arena's input,
      reward and tiers read from the client array as numpy columns; Python touches an
      env only when its episode ends (no per-env Python in the hot loop).  Callable
      opponents that declare ``batched = True`` (frozen league members) act for all
      their arenas in one forward.
    * :meth:`step` — the general case: answers yielded one by one, each env's reward
      and info computed by the env itself in Python.

    The reward's state lives in C while batched steps run and in the env's reward object
    otherwise; :meth:`_to_python` / :meth:`_to_c` hand it over, with the env's step count
    and current snapshot, whenever the mode changes or an env leaves.

    Args:
        n_envs: envs of the vec env.
        action_repeat, input_layout: what every env in the lane uses (an env with other
            values stays on the Python path).
        spin_us: how long ``bpv_ready`` busy-polls before it sleeps in ``poll``.
        batch: commands per BATCH datagram (1..``BP_BATCH_MAX``, docs/protocol.md
            "Batches"): the clients of one server send in BATCHes over one shared
            socket and are answered in BATCH_SNAPs — one datagram each way per step
            instead of one per client; 0 sends each client's CMD from its own socket.
    """

    def __init__(self, n_envs: int, action_repeat: int, input_layout: int, spin_us: float = 200.0,
                 batch: int = int(C.BP_BATCH_MAX)):
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
        self.view = np.frombuffer(memoryview(self.clients).cast("B"), _view_dtype())
        self.actions = np.zeros((2 * n_envs, ACT_DIM), np.float32)
        self.inputs = np.zeros((2 * n_envs, self.dim), np.float32)
        self._rows = np.zeros(2 * n_envs, np.int32)
        if not 0 <= batch <= int(C.BP_BATCH_MAX):
            raise ValueError(f"batch must be 0 (off) .. {int(C.BP_BATCH_MAX)} commands per BATCH, got {batch}")
        self.batch = BpvBatch(clients=self._base, inputs=self.inputs.ctypes.data,
                              n_clients=2 * n_envs, max_items=batch)
        #: the lane's BpvBatch for the C calls (None: batching off); one socket per server
        self._bptr: int | None = ctypes.addressof(self.batch) if batch else None
        self._batch_socks: dict[tuple[str, int], socket.socket] = {}
        for c in self.clients:
            c.bfd = -1  # (a zeroed row would name fd 0) until admit gives it its server's
        self._need = [0] * n_envs
        self.loaded = [False] * n_envs
        self.parked = [False] * n_envs
        self._stepped = np.zeros(n_envs, bool)
        #: bumped whenever an env enters, leaves or parks: the cached per-range plan of
        #: a batched step (:meth:`_plan`) is rebuilt only then, not per step
        self._epoch = 0
        self._plans: dict[tuple[int, int], tuple[int, np.ndarray, list[int], list[tuple[Any, np.ndarray]]]] = {}
        self.n_loaded = 0
        #: the lane's C reward (the first admitted env's, when the lane can compute it)
        self.weights: BpRewardWeights | None = None
        self.tier_names: tuple[str, ...] = ()
        self.rewarded = [False] * n_envs
        self.n_rewarded = 0
        self._c_owns = False  # the reward state, step counts and snapshots live here now
        self.env_steps = np.zeros(n_envs, np.int64)
        self.max_steps = np.full(n_envs, np.iinfo(np.int64).max, np.int64)
        #: vector steps the lane ran; env steps it handed back to Python's loop (a
        #: defect: counted and reported by the benchmarks); commands it re-sent
        self.steps = 0
        self.batched_steps = 0
        self.fallbacks = 0
        self.resends = 0

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
            c.rewarded = 0
            if client is None:
                c.active = 0
                continue
            c.active, c.fd, c.session, c.slot = 1, client.fd, client.session, client.slot
            c.bfd, c.arena_id = self._batch_fd(env.address), env.arena_id or 0
            c.seq, c.cmd_seq = client.seq & 0xFFFFFFFF, client.cmd_seq & 0xFFFFFFFF
            c.match_id, c.tick = snap.match_id, snap.tick
            ctypes.memmove(ctypes.addressof(c.snap), snap.raw, SNAPSHOT_SIZE)
        if op is not None:  # the opponent acts on its own view of the current state
            self.inputs[2 * i + 1] = env._observe(snap, 1)
        self.rewarded[i] = self._can_reward(env.reward_fn)
        self.clients[2 * i].rewarded = int(self.rewarded[i])
        self.n_rewarded += self.rewarded[i]
        self.max_steps[i] = env.max_episode_steps or np.iinfo(np.int64).max
        self.loaded[i] = True
        self.parked[i] = False
        self._epoch += 1
        self.n_loaded += 1
        self._stepped[i] = False
        if self._c_owns:
            self._to_c(i, env)
        env._lane_exit = functools.partial(self.release, i, env)
        return True

    def _batch_fd(self, address: tuple[str, int]) -> int:
        """The socket the BATCHes to ``address``'s server travel by (made on first use and
        connected there, so its source IP is the clients' own: the server checks it), or
        -1 with batching off."""
        if self._bptr is None:
            return -1
        sock = self._batch_socks.get(address)
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UdpClient.RCVBUF)
            sock.connect(address)
            self._batch_socks[address] = sock
        return sock.fileno()

    def close(self) -> None:
        """Close the batch sockets (the clients' own belong to their envs)."""
        for sock in self._batch_socks.values():
            sock.close()
        self._batch_socks.clear()

    def _can_reward(self, reward: Any) -> bool:
        """Whether the lane's C reward computes ``reward`` (the first such env sets the
        lane's weights; an env whose weights differ keeps its Python reward)."""
        got = lane_reward(reward)
        if got is None:
            return False
        if self.weights is None:
            self.weights, self.tier_names = got
            return True
        return bytes(got[0]) == bytes(self.weights) and got[1] == self.tier_names

    def release(self, i: int, env: BrawlpitEnv) -> None:
        """Hand env ``i``'s sequence numbers, last commands and re-send packets back to
        its Python clients (before anything Python-side talks to its server) — and, after
        batched steps, its reward state, step count and current snapshot."""
        if not self.loaded[i]:
            return
        if self._c_owns and self._stepped[i]:
            self._to_python(i, env)
        self.loaded[i] = False
        self._epoch += 1
        self.n_loaded -= 1
        self.n_rewarded -= self.rewarded[i]
        self.rewarded[i] = False
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

    def _to_c(self, i: int, env: BrawlpitEnv) -> None:
        """Env ``i``'s reward state and step count into the lane (batched steps own them)."""
        if self.rewarded[i] and isinstance(env.reward_fn, TieredReward):
            st = self.clients[2 * i].rstate
            st.life_start, st.intervals_paid, st.last_engage = env.reward_fn.state()
        self.env_steps[i] = env._steps

    def _to_python(self, i: int, env: BrawlpitEnv) -> None:
        """Env ``i``'s reward state, step count and current snapshot back to the env."""
        if self.rewarded[i] and isinstance(env.reward_fn, TieredReward):
            st = self.clients[2 * i].rstate
            env.reward_fn.set_state(st.life_start, st.intervals_paid, st.last_engage)
        env._steps = int(self.env_steps[i])
        env._snap = P.snapshot_from_checked(self._answer(i))
        env._last_contact = time.monotonic()

    def park(self, i: int) -> None:
        """Leave env ``i`` in the lane but out of the next batched steps (its match is
        over and it has nothing to play next: an evaluation's tail); its rows' outputs
        are stale until it is admitted again."""
        self.clients[2 * i].active = self.clients[2 * i + 1].active = 0
        self.parked[i] = True
        self._epoch += 1

    def batchable(self) -> bool:
        """Whether the next vector step can be :meth:`step_batch`: every env in the lane
        with the lane's C reward."""
        return self.n_loaded == self.n_envs and self.n_rewarded == self.n_envs

    def _mode(self, envs: list[Any], batched: bool) -> None:
        """Move the reward state (and step counts, snapshots) to where the next step runs."""
        if batched == self._c_owns:
            return
        for i, env in enumerate(envs):
            if self.loaded[i]:
                (self._to_c if batched else self._to_python)(i, env)
        self._c_owns = batched

    # ------------------------------------------------------------- one vector step
    def _opponent_actions(self, envs: list[Any], idx: list[int]) -> list[int]:
        """Each lane env's callable opponent acts on its own view; opponents declaring
        ``batched = True`` act for all their arenas in one call.  The envs with one."""
        singles, groups = self._opponents(envs, idx)
        self._act_opponents(singles, groups, envs)
        return sorted(singles + [int(r) // 2 for _, rows in groups for r in rows])

    @staticmethod
    def _opponents(envs: list[Any], idx: Any) -> tuple[list[int], list[tuple[Any, np.ndarray]]]:
        """The envs of ``idx`` whose callable opponent acts alone, and the batched
        opponents with the opponent rows (``2*i+1``) each acts for."""
        groups: dict[int, tuple[Any, list[int]]] = {}
        singles: list[int] = []
        for i in idx:
            fn = envs[i]._op_fn
            if fn is None:
                continue
            if getattr(fn, "batched", False):
                groups.setdefault(id(fn), (fn, []))[1].append(2 * i + 1)
            else:
                singles.append(i)
        return singles, [(fn, np.asarray(rows, np.intp)) for fn, rows in groups.values()]

    def _act_opponents(self, singles: list[int], groups: list[tuple[Any, np.ndarray]],
                       envs: list[Any]) -> None:
        acts, inputs = self.actions, self.inputs
        for i in singles:  # its own array, as the Python path gives it (one may keep it)
            acts[2 * i + 1] = envs[i]._op_fn(inputs[2 * i + 1].copy())
        for fn, rows in groups:
            acts[rows] = fn(inputs[rows])

    def _plan(self, envs: list[Any], lo: int, hi: int
              ) -> tuple[int, np.ndarray, list[int], list[tuple[Any, np.ndarray]]]:
        """What a batched step of envs ``lo..hi`` does besides the C call — which envs
        are live, which opponents act for which rows — worked out once per lane epoch (an
        env entering, leaving or parking), so a step runs no per-env Python."""
        plan = self._plans.get((lo, hi))
        if plan is None or plan[0] != self._epoch:
            live = np.asarray([i for i in range(lo, hi) if not self.parked[i]], np.intp)
            plan = (self._epoch, live, *self._opponents(envs, live.tolist()))
            self._plans[(lo, hi)] = plan
        return plan

    def step_batch(self, envs: list[Any], actions: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One vector step of every env (:meth:`batchable` must hold): ``(inputs,
        rewards, tiers, terminated, truncated)`` as arrays over the envs (``inputs`` and
        ``tiers`` are views: copy what you keep).  An env whose answer does not come is
        re-sent its command (``resends``) for up to :data:`BATCH_PATIENCE_S`, then
        finished by its own Python loop (``fallbacks``: it raises with the server's
        log when the server is gone)."""
        self.send_rows(envs, actions, 0, self.n_envs)
        return self.wait_rows(envs, actions, 0, self.n_envs)

    def send_rows(self, envs: list[Any], actions: np.ndarray, lo: int, hi: int) -> None:
        """The first half of a batched step for envs ``lo..hi`` (``actions`` their rows):
        their opponents act and every command goes out.  The caller may work (a forward
        pass for other envs) while the server steps them, then :meth:`wait_rows`."""
        self._mode(envs, True)
        acts = self.actions
        acts[2 * lo:2 * hi:2] = actions
        _, live, singles, groups = self._plan(envs, lo, hi)
        self._act_opponents(singles, groups, envs)
        self._stepped[live] = True
        self._lib.bpv_send(self._base + 2 * lo * self._size, 2 * (hi - lo),
                           acts[2 * lo:].ctypes.data, self.action_repeat, self._bptr)
        self.steps += 1
        self.batched_steps += 1

    def wait_rows(self, envs: list[Any], actions: np.ndarray, lo: int, hi: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The second half of a batched step of envs ``lo..hi``: every answer in, the
        ``(inputs, rewards, tiers, terminated, truncated)`` of those envs."""
        lib, rows = self._lib, self._rows.ctypes.data
        base, count = self._base + 2 * lo * self._size, 2 * (hi - lo)
        rw = ctypes.addressof(self.weights)  # type: ignore[arg-type]
        layout, spin = self.input_layout, self.spin_us
        inputs = self.inputs[2 * lo:].ctypes.data
        t0 = None
        while True:
            k = lib.bpv_ready(base, count, layout, inputs, spin, BUDGET_US, rows, rw, self._bptr)
            if k == -1:
                break  # none pending: every answer is in
            if k == -2:  # nothing for a whole budget: re-send, or give up on those envs
                t0 = t0 if t0 is not None else time.monotonic() - BUDGET_US * 1e-6
                if time.monotonic() - t0 > BATCH_PATIENCE_S:
                    break
                self.resends += lib.bpv_resend(base, count, self._bptr)
        if (self.view["status"][2 * lo:2 * hi] == BPV_PENDING).any():
            self._batch_fallbacks(envs, actions, lo, hi)
        self.env_steps[lo:hi] += 1
        mine = self.view[2 * lo:2 * hi:2]
        terminated = mine["phase"] == _OVER
        truncated = ~terminated & (self.env_steps[lo:hi] >= self.max_steps[lo:hi])
        return self.inputs[2 * lo:2 * hi:2], mine["reward"], mine["tiers"], terminated, truncated

    def _batch_fallbacks(self, envs: list[Any], actions: np.ndarray, lo: int, hi: int) -> None:
        """Envs a batched step could not finish.  Only the opponent client's answer
        missing: the env's own answer says where the match is, so the opponent's view is
        built from it.  The env's own answer missing: its state is put back as it was
        before the step and its own loop finishes the step (re-sending, checking the
        server, its Python reward computing the step); then it re-enters the lane."""
        for i in range(lo, hi):
            me, op = self.clients[2 * i], self.clients[2 * i + 1]
            if me.status == BPV_DONE:
                if op.status == BPV_PENDING:
                    self.fallbacks += 1
                    cur = P.snapshot_from_checked(self._answer(i))
                    self.inputs[2 * i + 1] = build_input(
                        cur, 1, self.input_layout, (op.cmd.stick_x, op.cmd.stick_y, int(op.cmd.buttons)))
                    op.status = BPV_DONE
                continue
            if me.status != BPV_PENDING:
                continue
            env = envs[i]
            self._to_python(i, env)  # the lane's snapshot and reward state: the step's start
            obs, reward, _, _, info = self._fallback(i, env, actions[i - lo])
            self.admit(i, env)  # (refused when the match just ended: it resets next)
            cur = env._snap
            assert cur is not None
            ctypes.memmove(ctypes.addressof(me.snap), cur.raw, SNAPSHOT_SIZE)
            self.inputs[2 * i] = obs
            me.reward = reward
            for k, name in enumerate(self.tier_names):
                me.tiers[k] = info.get(f"reward/{name}", 0.0)
            me.status = BPV_DONE
            self.env_steps[i] = env._steps - 1  # wait_rows counts this step for every env

    def episode_info(self, i: int, env: BrawlpitEnv, elapsed: int) -> dict[str, Any]:
        """The full info of env ``i``'s last step (its episode ended), its state handed
        back to the env (which resets next)."""
        self._to_python(i, env)
        cur = env._snap
        assert cur is not None
        c = self.clients[2 * i]
        tiers = {name: float(c.tiers[k]) for k, name in enumerate(self.tier_names)}
        return env._info(cur, elapsed, match_outcome(cur, 0), tiers)

    def step(self, envs: list[Any], lane_idx: list[int], actions: np.ndarray
             ) -> Iterator[tuple[int, tuple[Any, ...]]]:
        """Send the commands of envs ``lane_idx`` (and their opponents'), then yield
        ``(i, env i's gym 5-tuple)`` as the answers come in — env *i*'s reward and info
        are computed while the server still ticks the others' arenas."""
        self._mode(envs, False)
        acts = self.actions
        acts[0::2] = actions
        need = self._need  # answers each env waits for: its own, and its opponent client's
        for i in lane_idx:
            self._stepped[i] = True
            need[i] = 1
        for i in self._opponent_actions(envs, lane_idx):
            need[i] = 2
        lib, base, n, clients = self._lib, self._base, 2 * self.n_envs, self.clients
        lib.bpv_send(base, n, acts.ctypes.data, self.action_repeat, self._bptr)
        self.steps += 1
        layout, inputs, spin = self.input_layout, self.inputs.ctypes.data, self.spin_us
        rows, rows_ptr = self._rows, self._rows.ctypes.data
        left = len(lane_idx)
        while left:
            k = lib.bpv_ready(base, n, layout, inputs, spin, BUDGET_US, rows_ptr, None, self._bptr)
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
        was = self._c_owns
        self._c_owns = False  # the env's state is already Python's (or restored)
        self.release(i, env)
        self._c_owns = was
        return env._lane_fallback(cur, op_done, action)
