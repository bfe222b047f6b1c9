"""BrawlpitEnv: a gymnasium env whose every step is real UDP packets.

The policy's action becomes the literal CMD datagram a client sends; the
observation is built from the literal SNAPSHOT datagram the C server
broadcasts.  Nothing in between reads the simulation's memory, so a trained
policy is a drop-in bot for the real protocol.

Timing model (docs/protocol.md, "Modes"):

* ``lockstep`` (default): each step sends one CMD covering ``action_repeat``
  ticks; the server advances exactly those ticks and answers with one
  snapshot.  With ``input_delay=d`` the command applies ``d`` ticks after the
  observation it answers (the first ``d`` ticks of a match are neutral input),
  which models human reaction time without breaking determinism.
* ``fastforward`` / ``realtime``: the server free-runs; a step sends the
  command, waits for a snapshot newer than the last one, then drains the
  socket to the freshest.  ``info["ticks_elapsed"]`` reports how many ticks
  really passed, which is why rewards read the match clock, never the step
  count.

Waiting: a short busy-poll with ``MSG_DONTWAIT`` before falling back to
``select`` — the round trip costs the process wake-up, not the network
(docs/benchmarks.md, "Calibration": ~26 µs polled against ~115 µs blocking).
While waiting, a dead server is noticed within ~0.1 s and reported with its
log tail; lost datagrams in lockstep are recovered by re-sending the
(idempotent) command.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from brawlkit.env.actions import ACT_DIM, NEUTRAL, Decoded, decode_action
from brawlkit.env.observation import INPUT_LAYOUT, OBS_BOUND, build_input, check_input_layout
from brawlkit.env.rewards import OutcomeReward, RewardFn, match_outcome
from brawlkit.env.udp_client import EnvError, ServerLink, UdpClient, send_step_commands
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import MODE_IDS, MODES, C, check_action_repeat, check_input_delay
from brawlkit.wire.cpu_level import CpuLevel
from brawlkit.wire.protocol import Snapshot, snapshot_or_none
from brawlkit.wire.server_process import DEFAULT_CLIENT_TIMEOUT_S, ServerProcess

Opponent = str | Callable[[np.ndarray], np.ndarray] | None




#: info key of each reward tier name ("reward/<tier>"), filled as tiers are seen
_REWARD_KEYS: dict[str, str] = {}


def step_info(snap: Snapshot, elapsed: int, outcome: str | None, tiers: dict[str, float],
              opponent: str, slot: int = 0) -> dict[str, Any]:
    """The ``info`` of one step ended by ``snap``, from ``slot``'s side: what the env
    returns, each agent of the PettingZoo view gets, and ``bench env``'s in-process
    reference builds to do the same work (one declaration of the keys, docs/observation.md)."""
    me, op = snap.players[slot], snap.players[1 - slot]
    info: dict[str, Any] = {
        "ticks_elapsed": elapsed,
        "tick": snap.tick,
        "ticks_left": snap.ticks_left,
        "self_damage": me.damage,
        "other_damage": op.damage,
        "self_stocks": me.stocks,
        "other_stocks": op.stocks,
        "opponent": opponent,
        "outcome": outcome,
    }
    keys = _REWARD_KEYS
    for k, v in tiers.items():  # "reward/<tier>", the key built once per tier name
        info[keys.get(k) or keys.setdefault(k, f"reward/{k}")] = v
    return info


def _nonce() -> int:
    return int.from_bytes(os.urandom(4), "little")


class ParsedOpponent(NamedTuple):
    """An opponent spec taken apart once: what the server, the env and the info need."""

    cpu_level: int
    """the arena's CPU level (1..8), ``BP_CPU_NONE`` (a callable plays) or ``BP_CPU_KEEP``"""
    fn: Callable[[np.ndarray], np.ndarray] | None
    label: str
    """what ``info["opponent"]`` says"""


def parse_opponent(spec: Opponent) -> ParsedOpponent:
    """Map an opponent spec to (server cpu_level, callable, label).

    ``"cpu:L"`` is the built-in CPU at level L inside the server
    (:class:`~brawlkit.wire.cpu_level.CpuLevel`); a callable receives the opponent's
    own (mirrored) observation and returns its action, sent as a second client's
    packets; ``None`` leaves slot 1 to whatever the server was started with (e.g. an
    external bot).
    """
    if spec is None:
        return ParsedOpponent(C.BP_CPU_KEEP, None, "external")
    if callable(spec):
        return ParsedOpponent(C.BP_CPU_NONE, spec,
                              getattr(spec, "label", getattr(spec, "__name__", "callable")))
    try:
        cpu = CpuLevel.parse(spec)
    except ValueError as e:
        raise ValueError(f"opponent must be 'cpu:L', a callable(obs) -> action, or None: {e}") \
            from None
    return ParsedOpponent(cpu.level, None, cpu.spec)


class BrawlpitEnv(ServerLink, gym.Env[np.ndarray, np.ndarray]):
    """BRAWLPIT over real UDP: slot 0 is the policy, slot 1 the opponent.

    Args:
        mode: ``lockstep`` (deterministic, default), ``fastforward`` or ``realtime``.
        action_repeat: ticks one action covers (>= 1).
        input_delay: ticks between an observation and the first tick its action
            applies to (human reaction time; lockstep only).
        input_layout: which policy input the observation is (docs/observation.md
            "Policy input layouts"): 1 = the 31-value observation, 2 (default) = it
            plus this player's previous command, fighter state and both action states.
        opponent: ``"cpu:L"``, a callable(obs) -> action, or None (see
            :func:`parse_opponent`); ``reset(options={"opponent": ...})`` switches it.
        opponent_sampler: called at every reset without an explicit opponent;
            how a curriculum or league picks the next opponent.
        reward: a :class:`brawlkit.rewards.RewardFn`; default tier 1 only.
        speed: fastforward multiple of real time.
        max_episode_steps: an external step limit → ``truncated``.
        server: a running :class:`~brawlkit.wire.server_process.ServerProcess` to share: the
            env plays in an arena of its own on it (many envs, one process) and
            leaves the server running on ``close()``.  Default: the env starts and
            owns a server.
        server_address: a server someone else runs (``(host, port)``); the env
            joins ``arena`` there, or the oldest arena with slot 0 free in this mode
            (else a new one), and an external client takes slot 1 (``opponent=None``).
        arena: with ``server_address``, the arena id to join.
        recv_timeout: seconds without an answer before raising :class:`EnvError` from a
            server at ``server_address``; a local server process (owned or ``server=``)
            that is alive is waited for up to ``LOCAL_SERVER_PATIENCE_S`` (120 s):
            a loaded machine starves it, a dead one is reported at once.
        poll_us: how long the client busy-polls for a snapshot before blocking.
        parallel: how many envs (servers) are stepped together with this one;
            the server decides its busy-poll window from it
            (:func:`brawlkit.wire.server_process.spin_rule`).
        server_spin_us: override that window (``--spin-us``; 0 = always block).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        mode: str = "lockstep",
        action_repeat: int = 4,
        input_delay: int = 0,
        opponent: Opponent = "cpu:3",
        input_layout: int = INPUT_LAYOUT,
        reward: RewardFn | None = None,
        seed: int | None = None,
        speed: float = 8.0,
        opponent_sampler: Callable[[], Opponent] | None = None,
        max_episode_steps: int | None = None,
        server: ServerProcess | None = None,
        server_address: tuple[str, int] | None = None,
        arena: int | None = None,
        recv_timeout: float = 5.0,
        poll_us: float = 200.0,
        parallel: int = 1,
        server_spin_us: int | None = None,
    ) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        check_action_repeat(action_repeat)
        check_input_delay(input_delay)
        if input_delay and mode != "lockstep":
            raise ValueError("input_delay is defined for lockstep mode only (the free-running "
                             "modes already have real network/compute delay)")
        self.mode = mode
        self.action_repeat = int(action_repeat)
        self.input_layout = int(input_layout)
        obs_dim = check_input_layout(self.input_layout, "BrawlpitEnv(input_layout=...)")
        self.input_delay = int(input_delay)
        self.reward_fn: RewardFn = reward if reward is not None else OutcomeReward()
        self.opponent_sampler = opponent_sampler
        self.max_episode_steps = max_episode_steps
        self.recv_timeout = recv_timeout
        self._poll_us = poll_us
        default = parse_opponent(opponent)  # validates early
        self._default_opponent = opponent
        self._seed_base = seed

        self.observation_space = gym.spaces.Box(-OBS_BOUND, OBS_BOUND, (obs_dim,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)

        self._speed = float(speed)
        self._address: tuple[str, int] | None = None
        self._arena_op, self._arena_id = C.BP_ARENA_CREATE, 0
        # the CPU level the arena is created with: the opponent's, or none (slot 1 free)
        self._cpu_level = default.cpu_level if default.cpu_level != C.BP_CPU_KEEP \
            else C.BP_CPU_NONE
        self._place(server, server_address, arena, server_spin_us, parallel)
        self.arena_id: int | None = None  # the arena this env plays in (from WELCOME)
        self._me: UdpClient | None = None
        self._op: UdpClient | None = None
        self._op_fn: Callable[[np.ndarray], np.ndarray] | None = None
        self._op_label = "none"
        self._snap: Snapshot | None = None
        self._known_match = -1  # newest match id seen; a RESET must produce another
        self._last_contact = time.monotonic()  # of the Python path's last answered exchange
        self._sched_me: list[tuple[int, Decoded]] = []
        self._sched_op: list[tuple[int, Decoded]] = []
        self._prev: list[Decoded] = [NEUTRAL, NEUTRAL]  # the command each slot sent last step
        self._steps = 0
        self._episode_tiers: dict[str, float] = {}  # each reward tier summed over this episode
        self._episode = 0
        self._pending: np.ndarray | None = None
        self._closed = False
        #: set while a vec env's fast lane (brawlkit/env/fastlane.py) owns this env's
        #: client state; called before anything Python-side talks to the server
        self._lane_exit: Callable[[], None] | None = None

    def _place(self, server: ServerProcess | None, server_address: tuple[str, int] | None,
               arena: int | None, spin_us: int | None, parallel: int) -> None:
        """Where this env plays: an arena of ``server`` (shared), of a server of its own
        (neither given), or of someone else's at ``server_address`` — the arena ``arena``,
        or any with slot 1 free."""
        if server is not None and server_address is not None:
            raise ValueError("pass server= (a shared ServerProcess) or server_address=, not both")
        self.server: ServerProcess | None = server
        self._owns_server = server is None and server_address is None
        if self._owns_server:
            self.server = ServerProcess(mode=self.mode, spin_us=spin_us, parallel=parallel)
        elif server_address is not None:
            self._address = server_address
            if arena is not None:
                self._arena_op, self._arena_id = C.BP_ARENA_JOIN, int(arena)
            else:
                self._arena_op = C.BP_ARENA_ANY

    # ------------------------------------------------------------------ plumbing
    def _join(self, want_slot: int, op: int, arena_id: int = 0) -> UdpClient:
        """HELLO until WELCOME: slot ``want_slot`` of a new arena (``BP_ARENA_CREATE``,
        configured from this env), of arena ``arena_id`` (``BP_ARENA_JOIN``) or of any
        arena with it free (``BP_ARENA_ANY``); an ERROR reply raises :class:`EnvError`."""
        client, w = self._hello(want_slot, _nonce(), f"slot {want_slot}", arena_op=op,
                                arena_id=arena_id, mode=MODE_IDS[self.mode],
                                cpu_level=self._cpu_level, seed=self._seed_base or 0,
                                speed=self._speed if self.mode == "fastforward" else 0.0)
        self._known_match = w.match_id
        self.arena_id = w.arena_id
        return client

    def _rejoin_if_forgotten(self) -> None:
        """Start over in a fresh arena when the server has surely forgotten this env.

        A client silent for the server's ``--client-timeout`` is dropped and its arena
        reclaimed; anything it sends afterwards is dropped unanswered.  Evaluation envs
        sit idle through a whole training generation, which on a loaded machine can take
        longer than that: past half the timeout, the env leaves (BYE, harmless if already
        forgotten) and joins again, configured as before.  Only an env that creates its
        own arena can; one that joined someone else's arena keeps it."""
        if self._me is None or self._arena_op != C.BP_ARENA_CREATE:
            return
        timeout = getattr(self.server, "client_timeout", None) or DEFAULT_CLIENT_TIMEOUT_S
        if time.monotonic() - self._last_contact < 0.5 * timeout:
            return
        for client in (self._op, self._me):
            if client is not None:
                self._bye(client)
        self._me = self._op = None  # the next reset joins (and seats the opponent) anew

    def _bye(self, client: UdpClient) -> None:
        client.send(P.pack_bye(client.next_seq(), client.session))
        client.close()

    def _reset_match(self, seed: int, cpu_level: int, playing: bool = True) -> Snapshot:
        """RESET and wait for the new match's first snapshot on every client.

        The RESET carries a fresh nonce and is re-sent until the new match shows:
        the server applies a nonce once, so a lost RESET (or a lost answer) costs
        a retry, never a second match.  ``playing=False`` accepts the new match in
        any phase (freeing slot 1 of the CPU leaves it WAITING for a client).
        """
        me = self._me
        assert me is not None
        old = self._known_match
        lockstep = self.mode == "lockstep"

        def first_of_new_match(d: bytes) -> bool:
            s = snapshot_or_none(d)
            if s is None or s.match_id == old:
                return False
            if not playing:
                return True
            return s.phase == C.BP_PHASE_PLAYING and (s.tick == 0 or not lockstep)

        reset = P.pack_reset(me.next_seq(), me.session, seed, cpu_level, _nonce())
        me.send(reset)
        snap = snapshot_or_none(self._wait(me, first_of_new_match, resend=reset))
        assert snap is not None
        self._known_match = snap.match_id
        if self._op is not None and playing:  # the opponent client sees the same match start
            self._wait(self._op, first_of_new_match)
        self._last_contact = time.monotonic()
        return snap

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if self._closed:
            raise EnvError("reset() on a closed BrawlpitEnv")
        if self._lane_exit is not None:
            self._lane_exit()
        options = options or {}
        if "opponent" in options:
            spec = options["opponent"]
        elif self.opponent_sampler is not None:
            spec = self.opponent_sampler()
        else:
            spec = self._default_opponent
        cpu_level, fn, label = parse_opponent(spec)
        self._rejoin_if_forgotten()
        if self._me is None:
            self._me = self._join(0, self._arena_op, self._arena_id)
        # Seat the opponent: a callable needs a second client in slot 1 of this arena.
        if fn is None and self._op is not None:
            self._bye(self._op)
            self._op = None
        if fn is not None and self._op is None:
            if self._cpu_level != C.BP_CPU_NONE:
                self._reset_match(0, C.BP_CPU_NONE, playing=False)  # free slot 1 of the CPU
                self._cpu_level = C.BP_CPU_NONE
            assert self.arena_id is not None
            self._op = self._join(1, C.BP_ARENA_JOIN, self.arena_id)
        self._op_fn, self._op_label = fn, label
        if cpu_level != C.BP_CPU_KEEP:
            self._cpu_level = cpu_level
        match_seed = int(self.np_random.integers(0, 2**32 - 1)) if seed is None else seed
        if seed is None and self._seed_base is not None and self._episode == 0:
            match_seed = self._seed_base
        self._snap = self._reset_match(match_seed, cpu_level)
        self._sched_me = [(0, NEUTRAL)]
        self._prev = [NEUTRAL, NEUTRAL]  # the command each slot sent last step
        self._sched_op = [(0, NEUTRAL)]
        self._steps = 0
        self._episode_tiers = {}
        self._episode += 1
        self.reward_fn.reset(self._snap, 0)
        return self._observe(self._snap, 0), self._info(self._snap, 0, None, {})

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.step_send(action)
        return self.step_recv()

    def step_send(self, action: np.ndarray) -> None:
        """Send this step's command(s); pair with :meth:`step_recv`."""
        if self._snap is None or self._me is None:
            raise EnvError("step() before reset()")
        if self._pending is not None:
            raise EnvError("step_send() twice without step_recv()")
        if self._lane_exit is not None:
            self._lane_exit()
        act = np.asarray(action, dtype=np.float32)
        self._pending = act
        self._prev[0] = decode_action(act)
        self._send_cmds(self._me, self._sched_me, self._prev[0])
        if self._op is not None and self._op_fn is not None:
            op_act = np.asarray(self._op_fn(self._observe(self._snap, 1)), dtype=np.float32)
            self._prev[1] = decode_action(op_act)
            self._send_cmds(self._op, self._sched_op, self._prev[1])

    def _send_cmds(self, client: UdpClient, sched: list[tuple[int, Decoded]], cmd: Decoded) -> None:
        """Send the commands covering this step's ticks (:func:`send_step_commands`)."""
        assert self._snap is not None
        send_step_commands(client, sched, cmd, self._snap.tick, self.action_repeat,
                           self.input_delay)

    def step_recv(self) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Wait for the step's snapshot and turn it into the gym 5-tuple."""
        if self._pending is None or self._snap is None or self._me is None:
            raise EnvError("step_recv() without step_send()")
        act, self._pending = self._pending, None
        prev = self._snap
        if prev.over:
            raise EnvError("step() after the match ended: call reset()")
        cur = self._recv_step(prev)
        return self._finish_step(prev, cur, act, self._observe(cur, 0))

    def _finish_step(self, prev: Snapshot, cur: Snapshot, act: np.ndarray, obs: np.ndarray
                     ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """The gym 5-tuple of the step from ``prev`` to ``cur`` (both paths end here)."""
        self._snap = cur
        self._last_contact = time.monotonic()
        self._steps += 1
        elapsed = cur.tick - prev.tick
        reward, tiers = self.reward_fn(prev, cur, 0, elapsed, act)
        terminated = cur.over
        truncated = (not terminated and self.max_episode_steps is not None
                     and self._steps >= self.max_episode_steps)
        info = self._info(cur, elapsed, match_outcome(cur, 0), tiers)
        sums = self._episode_tiers
        for k, v in tiers.items():
            sums[k] = sums.get(k, 0.0) + v
        if terminated or truncated:  # each tier summed over the episode, for the callbacks
            info["episode_tiers"], self._episode_tiers = sums, {}
        return obs, float(reward), bool(terminated), bool(truncated), info

    # ------------------------------------------------------------------ the fast lane
    @property
    def lane_ok(self) -> bool:
        """Whether a vec env's fast lane may step this env now (brawlkit/env/fastlane.py):
        lockstep without input delay, in a match that has not ended, and its opponent the
        server's CPU, an external client or a callable (stepped by the lane too)."""
        snap = self._snap
        return (self.mode == "lockstep" and self.input_delay == 0 and self._me is not None
                and snap is not None and not snap.over and self._pending is None
                and not self._closed and (self._op is None or self._op_fn is not None))

    def _lane_result(self, cur: Snapshot, act: np.ndarray, obs: np.ndarray
                     ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """A step the lane ran: ``cur`` answered it and ``obs`` is its policy input."""
        prev = self._snap
        assert prev is not None
        return self._finish_step(prev, cur, np.asarray(act, dtype=np.float32), obs)

    def _lane_fallback(self, cur: Snapshot | None, op_done: bool, act: np.ndarray
                       ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """A step the lane sent but could not finish in time (the lane has handed the
        clients back): this env's receive loop waits for what is missing, re-sending the
        lane's CMDs, with the alive check and the timeout error."""
        prev = self._snap
        assert prev is not None
        cur = self._recv_step(prev, cur, op_done)
        return self._finish_step(prev, cur, np.asarray(act, dtype=np.float32), self._observe(cur, 0))

    def _observe(self, snap: Snapshot, slot: int) -> np.ndarray:
        """``slot``'s policy input: the snapshot as seen from ``slot``, and (layout 2) the
        command ``slot`` sent last step."""
        return build_input(snap, slot, self.input_layout, self._prev[slot])

    def _recv_step(self, prev: Snapshot, me_done: Snapshot | None = None,
                   op_done: bool = False) -> Snapshot:
        """The snapshot answering this step.  ``me_done`` / ``op_done``: the fast lane
        already received this client's / the opponent client's answer."""
        me = self._me
        assert me is not None
        match_id = prev.match_id
        if self.mode == "lockstep":
            target = prev.tick + self.action_repeat
            if self._op is None and me_done is None:  # fast path: the answer is usually in already (a spinning
                d = me.recv_nowait()  # server replies within a few µs): no wait loop
                if d is not None and (s0 := snapshot_or_none(d)) is not None \
                        and s0.match_id == match_id and (s0.tick >= target or s0.over):
                    return s0
            got: list[Snapshot] = []

            def accept(d: bytes) -> bool:
                s = snapshot_or_none(d)
                if s is None or s.match_id != match_id:
                    return False
                if s.tick >= target or s.over:
                    got.append(s)
                    return True
                return False

            if me_done is None:
                self._wait(me, accept, resend=me.last_cmds)
            else:
                got.append(me_done)
            if self._op is not None and not op_done:  # keep the opponent's socket drained and in step
                self._wait(self._op, lambda d: (s := snapshot_or_none(d)) is not None
                           and s.match_id == match_id and (s.tick >= target or s.over),
                           resend=self._op.last_cmds)
            return got[-1]
        # free-running: at least one newer snapshot, then drain to the freshest
        newest: list[Snapshot] = []

        def newer(d: bytes) -> bool:
            s = snapshot_or_none(d)
            if s is not None and s.match_id == match_id and (s.tick > prev.tick or s.over):
                newest.append(s)
                return True
            return False

        self._wait(me, newer)
        # drain without decoding every datagram: only the freshest one matters
        backlog: list[bytes] = []
        while (d := me.recv_nowait()) is not None:
            backlog.append(d)
        for d in reversed(backlog):
            s = snapshot_or_none(d)
            if s is not None and s.match_id == match_id and s.tick >= newest[-1].tick:
                newest.append(s)
                break
        if self._op is not None:
            while self._op.recv_nowait() is not None:
                pass
        return newest[-1]

    def _info(self, snap: Snapshot, elapsed: int, outcome: str | None,
              tiers: dict[str, float]) -> dict[str, Any]:
        return step_info(snap, elapsed, outcome, tiers, self._op_label)

    @property
    def last_snapshot(self) -> Snapshot | None:
        """The most recent snapshot (raw bytes in ``.raw``), for tools and tests."""
        return self._snap

    def close(self) -> None:
        if self._closed:
            return
        if self._lane_exit is not None:
            self._lane_exit()
        self._closed = True
        for c in (self._op, self._me):
            if c is not None:
                try:
                    self._bye(c)
                except OSError:
                    c.close()
        self._me = self._op = None
        if self.server is not None and self._owns_server:
            self.server.close()
            self.server.remove_log()


