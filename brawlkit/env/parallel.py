"""BrawlpitParallelEnv: one BRAWLPIT match as a PettingZoo ``ParallelEnv``, both seats agents.

Multi-agent libraries (PettingZoo's own tooling, RLlib, TorchRL, …) expect a
``ParallelEnv``; this is the packet-level match behind :class:`~brawlkit.env.BrawlpitEnv`
with *both* slots handed to the caller instead of one slot to a CPU or a callable.

* Agents are ``player_0`` (slot 0) and ``player_1`` (slot 1).  Each is a real UDP
  client of the same lockstep arena: ``player_0`` creates the arena (HELLO
  ``arena_op`` CREATE, no CPU), ``player_1`` joins it with the arena id from
  ``player_0``'s WELCOME (``arena_op`` JOIN).  Each acts only through its own
  client's CMD packets and sees the policy input built from the SNAPSHOT bytes *its
  own* client received, from its own point of view (``build_input(snap, slot)``:
  *self* is its fighter, *other* the opponent — docs/observation.md).  So a policy
  trained here is a drop-in bot for either seat of the real protocol.
* One ``step`` = ``action_repeat`` ticks for both agents: both CMDs cover the same
  ticks ``[T, T + repeat)`` (shifted by ``input_delay`` as in ``BrawlpitEnv``), and the
  arena advances only once both are in (lockstep), so neither agent can get ahead.
* ``reset(seed=...)`` sends a RESET with a fresh nonce (docs/protocol.md: a re-sent
  RESET with the same nonce is a retry, never a second match) and the seed; the match
  depends only on the seed and the inputs, so the same seed and the same actions give
  the same trajectory, bit for bit.
* Rewards come from :mod:`brawlkit.env.rewards`, one reward object per agent, each
  scoring from its own slot.  ``zero_sum=True`` (default) pays each agent half the
  difference of the two raw rewards, so ``r_0 == -r_1`` every step (docs/pettingzoo.md).
* ``terminations`` are True for both agents at game over (stocks or the buzzer);
  ``truncations`` for both at ``max_cycles`` steps.  After either, ``agents`` is empty
  until the next ``reset``.

Only lockstep is offered: the free-running modes let two independent clients drift
apart by a tick or more, which a synchronous ``step`` cannot express.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

try:
    from pettingzoo import ParallelEnv
except ImportError as e:  # a pinned requirement, but only this module needs it
    raise ImportError(
        "brawlkit.env.parallel (make_parallel_env) needs PettingZoo: "
        "`pip install pettingzoo==1.27.0` (pinned in requirements.txt; `make setup` installs it)"
    ) from e

from brawlkit.env.actions import ACT_DIM, NEUTRAL, Decoded, decode_action
from brawlkit.env.brawlpit import _nonce, step_info
from brawlkit.env.observation import (
    INPUT_LAYOUT,
    OBS_BOUND,
    OBS_DIM,
    build_input,
    build_observation,
    check_input_layout,
)
from brawlkit.env.rewards import RewardFn, make_reward, match_outcome
from brawlkit.env.udp_client import EnvError, ServerLink, UdpClient, send_step_commands
from brawlkit.replay.play import TickState
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C, check_action_repeat, check_input_delay
from brawlkit.wire.protocol import Snapshot, snapshot_or_none
from brawlkit.wire.server_process import ServerProcess

AGENTS: tuple[str, str] = ("player_0", "player_1")
"""the agent names; ``player_i`` plays slot ``i``"""


class BrawlpitParallelEnv(ServerLink, ParallelEnv[str, np.ndarray, np.ndarray]):
    """One lockstep BRAWLPIT match over real UDP, both seats agents (PettingZoo Parallel API).

    Args:
        action_repeat: ticks one step covers, for both agents (1..64; ``BrawlpitEnv``'s 4).
        input_delay: ticks between an observation and the first tick its action applies
            to, for both agents (human reaction time; the match stays deterministic).
        input_layout: the policy input each agent sees (docs/observation.md "Policy input
            layouts"): 1 = the 31-value observation, 2 (default) = it plus the agent's own
            previous command and fighter state.  The same Box as ``BrawlpitEnv``.
        reward: a reward name for :func:`brawlkit.env.rewards.make_reward` (``"outcome"``
            (default), ``"tiered"``, ``"llm_fighting"``, with ``:field=value`` overrides),
            or a zero-argument factory returning a fresh ``RewardFn``; each agent gets its
            own instance (reward objects keep per-match state).
        zero_sum: pay ``(raw_self - raw_other) / 2`` so the two rewards always sum to 0
            (default); False pays each agent its own raw reward (general-sum).
        max_cycles: steps after which both agents are truncated (PettingZoo's name for
            ``BrawlpitEnv(max_episode_steps=...)``); None = only the match's own end.
        seed: the first ``reset()``'s match seed when it is given none.
        server: a running :class:`~brawlkit.wire.server_process.ServerProcess` to play on (an
            arena of its own; left running on ``close()``).  Default: start one, owned.
        server_address: a server someone else runs, ``(host, port)``; the match is a
            new lockstep arena there.
        render_mode: None or ``"rgb_array"`` (a frame drawn with brawlkit.replay.render).
        recv_timeout: seconds without an answer before :class:`~brawlkit.env.EnvError` from a
            server at ``server_address``; a local server process (owned or ``server=``)
            that is alive is waited for up to ``LOCAL_SERVER_PATIENCE_S`` (120 s):
            a loaded machine starves it, a dead one is reported at once.
        poll_us: how long each client busy-polls for a snapshot before blocking.
        server_spin_us: the owned server's busy-poll window (None: ``spin_rule``).
    """

    metadata: dict[str, Any] = {"name": "brawlpit_v0", "render_modes": ["rgb_array"],
                                "render_fps": int(C.BP_TICK_HZ), "is_parallelizable": True}

    def __init__(
        self,
        action_repeat: int = 4,
        input_delay: int = 0,
        input_layout: int = INPUT_LAYOUT,
        reward: str | Callable[[], RewardFn] = "outcome",
        zero_sum: bool = True,
        max_cycles: int | None = None,
        seed: int | None = None,
        server: ServerProcess | None = None,
        server_address: tuple[str, int] | None = None,
        render_mode: str | None = None,
        recv_timeout: float = 5.0,
        poll_us: float = 200.0,
        server_spin_us: int | None = None,
    ) -> None:
        check_action_repeat(action_repeat)
        check_input_delay(input_delay)
        if max_cycles is not None and max_cycles < 1:
            raise ValueError(f"max_cycles must be >= 1 or None, got {max_cycles}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        if server is not None and server_address is not None:
            raise ValueError("pass server= (a shared ServerProcess) or server_address=, not both")
        self.action_repeat = int(action_repeat)
        self.input_delay = int(input_delay)
        self.input_layout = int(input_layout)
        obs_dim = check_input_layout(self.input_layout, "BrawlpitParallelEnv(input_layout=...)")
        if isinstance(reward, str):
            spec = reward
            make_reward(spec)  # validate the name now, not at the first reset

            def factory() -> RewardFn:
                return make_reward(spec)
        elif callable(reward):
            factory = reward
        else:
            raise ValueError(f"reward must be a reward name (e.g. 'outcome') or a factory, got {reward!r}")
        self.zero_sum = bool(zero_sum)
        self.max_cycles = max_cycles
        self.render_mode = render_mode
        self.recv_timeout = float(recv_timeout)
        self._poll_us = float(poll_us)
        self._seed_base = seed

        self.possible_agents: list[str] = list(AGENTS)
        self.agents: list[str] = []
        obs_space = gymnasium.spaces.Box(-OBS_BOUND, OBS_BOUND, (obs_dim,), np.float32)
        act_space = gymnasium.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
        # one object per agent, returned as is every time (PettingZoo's api test checks identity)
        self.observation_spaces = {a: obs_space if i == 0 else _copy_box(obs_space)
                                   for i, a in enumerate(AGENTS)}
        self.action_spaces = {a: act_space if i == 0 else _copy_box(act_space)
                              for i, a in enumerate(AGENTS)}
        #: the global state (:meth:`state`): the 31-value observation from slot 0's side
        self.state_space = gymnasium.spaces.Box(-OBS_BOUND, OBS_BOUND, (OBS_DIM,), np.float32)
        self._rewards: list[RewardFn] = [factory(), factory()]

        self.server: ServerProcess | None = server
        self._owns_server = server is None and server_address is None
        if self._owns_server:
            self.server = ServerProcess(mode="lockstep", spin_us=server_spin_us, parallel=1)
        self._address = server_address
        self.arena_id: int | None = None
        self._clients: list[UdpClient] = []
        self._snaps: list[Snapshot] = []  # the newest snapshot each client received
        self._known_match = -1
        self._sched: list[list[tuple[int, Decoded]]] = [[(0, NEUTRAL)], [(0, NEUTRAL)]]
        self._prev: list[Decoded] = [NEUTRAL, NEUTRAL]
        self._steps = 0
        self._episode = 0
        self._np_random: np.random.Generator = np.random.default_rng(seed)
        self._fig: Any = None
        self._drawer: Any = None
        self._closed = False

    # ------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> gymnasium.spaces.Space[np.ndarray]:
        return self.observation_spaces[self._check_agent(agent)]

    def action_space(self, agent: str) -> gymnasium.spaces.Space[np.ndarray]:
        return self.action_spaces[self._check_agent(agent)]

    @staticmethod
    def _check_agent(agent: str) -> str:
        if agent not in AGENTS:
            raise KeyError(f"unknown agent {agent!r}; the agents are {', '.join(AGENTS)}")
        return agent

    # ------------------------------------------------------------------ plumbing
    def _join(self, slot: int) -> UdpClient:
        """HELLO until WELCOME: slot 0 creates a lockstep arena without a CPU, slot 1 JOINs it."""
        if slot == 0:
            op, arena = C.BP_ARENA_CREATE, 0
        else:
            assert self.arena_id is not None
            op, arena = C.BP_ARENA_JOIN, self.arena_id
        client, w = self._hello(slot, _nonce(), f"slot {slot} (arena {arena or 'new'})",
                                arena_op=op, arena_id=arena, mode=C.BP_MODE_LOCKSTEP,
                                cpu_level=C.BP_CPU_NONE,
                                seed=(self._seed_base or 0) & 0xFFFFFFFF, speed=0.0)
        if w.slot != slot or w.mode != C.BP_MODE_LOCKSTEP:
            client.close()
            raise EnvError(f"server at {self.address} gave slot {w.slot} in mode {w.mode}; expected "
                           f"slot {slot} of a lockstep arena")
        self._known_match = max(self._known_match, w.match_id)
        self.arena_id = w.arena_id
        return client

    def _connect(self) -> None:
        if not self._clients:
            c0 = self._join(0)
            try:
                c1 = self._join(1)
            except BaseException:
                _bye(c0)
                raise
            self._clients = [c0, c1]

    def _reset_match(self, seed: int) -> list[Snapshot]:
        """RESET (fresh nonce, ``seed``, no CPU) and each client's first snapshot of the new match.

        ``player_0``'s client sends the RESET until it sees the new match.  Every client
        of the arena is sent that match's first snapshot; should ``player_1``'s copy be
        lost, its client re-sends the *same* RESET (same nonce) after 50 ms, which the
        server answers as a retry — the current snapshot, never a second match.
        """
        old = self._known_match
        nonce = _nonce()

        def first_of_new_match(d: bytes) -> bool:
            s = snapshot_or_none(d)
            return (s is not None and s.match_id != old and s.phase == C.BP_PHASE_PLAYING
                    and s.tick == 0)

        snaps = []
        for c in self._clients:  # slot 0 first: its RESET is the one that starts the match
            reset = P.pack_reset(c.next_seq(), c.session, seed, C.BP_CPU_NONE, nonce)
            if c.slot == 0:
                c.send(reset)
            s = snapshot_or_none(self._wait(c, first_of_new_match, resend=[reset]))
            assert s is not None
            snaps.append(s)
            c.cmd_seq = 0
        self._known_match = snaps[0].match_id
        return snaps

    # ------------------------------------------------------------------ PettingZoo API
    def reset(self, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
        """Start a new match: ``seed`` is its seed (else one drawn from the env's generator,
        itself seeded by the last explicit seed, or the constructor's ``seed`` first).
        ``options`` is accepted for the API and ignored (no option changes a match)."""
        if self._closed:
            raise EnvError("reset() on a closed BrawlpitParallelEnv")
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
            match_seed = int(seed) & 0xFFFFFFFF
        elif self._episode == 0 and self._seed_base is not None:
            match_seed = int(self._seed_base) & 0xFFFFFFFF
        else:
            match_seed = int(self._np_random.integers(0, 2**32 - 1))
        self._connect()
        self._snaps = self._reset_match(match_seed)
        self._sched = [[(0, NEUTRAL)], [(0, NEUTRAL)]]
        self._prev = [NEUTRAL, NEUTRAL]
        self._steps = 0
        self._episode += 1
        self.agents = list(AGENTS)
        for slot, fn in enumerate(self._rewards):
            fn.reset(self._snaps[slot], slot)
        obs = {a: self._observe(i) for i, a in enumerate(AGENTS)}
        infos = {a: self._info(i, self._snaps[i], 0, {}, 0.0) for i, a in enumerate(AGENTS)}
        for info in infos.values():
            info["seed"] = match_seed
        return obs, infos

    def step(self, actions: dict[str, np.ndarray]) -> tuple[
        dict[str, np.ndarray], dict[str, float], dict[str, bool], dict[str, bool], dict[str, dict[str, Any]]
    ]:
        """Both agents' commands cover the same ``action_repeat`` ticks; then both snapshots."""
        if self._closed:
            raise EnvError("step() on a closed BrawlpitParallelEnv")
        if not self._snaps:
            raise EnvError("step() before reset()")
        if not self.agents:
            raise EnvError("step() after the match ended (terminated or truncated): call reset()")
        missing = [a for a in self.agents if a not in actions]
        unknown = [a for a in actions if a not in AGENTS]
        if missing or unknown:
            raise ValueError(f"step() needs one action per live agent {self.agents}; missing "
                             f"{missing}, unknown {unknown}")
        acts = [np.asarray(actions[a], dtype=np.float32) for a in AGENTS]
        prev = self._snaps
        for i, c in enumerate(self._clients):  # both commands go out before either answer is read
            self._prev[i] = decode_action(acts[i])
            self._send_cmds(c, self._sched[i], self._prev[i], prev[i].tick)
        cur = [self._recv_step(c, prev[i]) for i, c in enumerate(self._clients)]
        if (cur[0].tick, cur[0].phase, cur[0].winner) != (cur[1].tick, cur[1].phase, cur[1].winner):
            raise EnvError(f"the two clients saw different states of arena {self.arena_id} "
                           f"(ticks {cur[0].tick} / {cur[1].tick}); a lockstep arena cannot "
                           f"diverge — another client may be sending on these sessions")
        self._snaps = cur
        self._steps += 1
        elapsed = cur[0].tick - prev[0].tick
        raw, tiers = [], []
        for i, fn in enumerate(self._rewards):
            r, t = fn(prev[i], cur[i], i, elapsed, acts[i])
            raw.append(float(r))
            tiers.append(t)
        if self.zero_sum:
            paid = [(raw[0] - raw[1]) / 2.0, (raw[1] - raw[0]) / 2.0]
        else:
            paid = raw
        terminated = cur[0].over
        truncated = (not terminated and self.max_cycles is not None and self._steps >= self.max_cycles)
        obs = {a: self._observe(i) for i, a in enumerate(AGENTS)}
        rewards = {a: paid[i] for i, a in enumerate(AGENTS)}
        terms = dict.fromkeys(AGENTS, bool(terminated))
        truncs = dict.fromkeys(AGENTS, bool(truncated))
        infos = {a: self._info(i, cur[i], elapsed, tiers[i], raw[i]) for i, a in enumerate(AGENTS)}
        if terminated or truncated:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def _send_cmds(self, client: UdpClient, sched: list[tuple[int, Decoded]], cmd: Decoded,
                   t0: int) -> None:
        """Send the commands covering ticks ``[t0, t0 + repeat)`` (as ``BrawlpitEnv``)."""
        send_step_commands(client, sched, cmd, t0, self.action_repeat, self.input_delay)

    def _recv_step(self, client: UdpClient, prev: Snapshot) -> Snapshot:
        """The snapshot at ``prev.tick + repeat`` (or the final one), re-sending this
        client's CMDs if it is slow to come (a lost CMD or a lost SNAPSHOT)."""
        target, match_id = prev.tick + self.action_repeat, prev.match_id
        got: list[Snapshot] = []

        def accept(d: bytes) -> bool:
            s = snapshot_or_none(d)
            if s is not None and s.match_id == match_id and (s.tick >= target or s.over):
                got.append(s)
                return True
            return False

        self._wait(client, accept, resend=client.last_cmds)
        return got[-1]

    def _observe(self, slot: int) -> np.ndarray:
        """``slot``'s policy input from the snapshot its own client received."""
        return build_input(self._snaps[slot], slot, self.input_layout, self._prev[slot])

    def _info(self, slot: int, snap: Snapshot, elapsed: int, tiers: dict[str, float],
              raw: float) -> dict[str, Any]:
        info = step_info(snap, elapsed, match_outcome(snap, slot), tiers, AGENTS[1 - slot], slot)
        info["reward/raw"] = raw
        return info

    def state(self) -> np.ndarray:
        """The global state: the 31-value observation from slot 0's side (both fighters,
        the clock); ``state_space`` is its Box."""
        if not self._snaps:
            raise EnvError("state() before reset()")
        return build_observation(self._snaps[0], 0)

    @property
    def last_snapshots(self) -> tuple[Snapshot, ...]:
        """The newest snapshot each agent's client received (``.raw`` = the wire bytes)."""
        return tuple(self._snaps)

    def render(self) -> np.ndarray | None:
        """``render_mode="rgb_array"``: the current state drawn as the replay renderer draws a
        tick (H × W × 3 uint8, a few ms); otherwise None."""
        if self.render_mode != "rgb_array" or not self._snaps:
            return None
        from brawlkit.replay.render import FrameDrawer, new_figure

        if self._fig is None:
            self._fig, ax = new_figure()
            self._drawer = FrameDrawer(ax, AGENTS)
        s = self._snaps[0]
        result = None
        if s.over:
            result = "draw" if s.winner == C.BP_WINNER_DRAW else f"{AGENTS[s.winner]} wins"
        self._drawer.update(TickState(s.tick, s.ticks_left, s.phase, s.winner, s.players), result)
        canvas = self._fig.canvas
        canvas.draw()
        return np.asarray(canvas.buffer_rgba())[..., :3].copy()

    def close(self) -> None:
        """BYE from both clients (their arena is reclaimed) and stop the server if this env
        started it.  Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.agents = []
        for c in reversed(self._clients):
            _bye(c)
        self._clients = []
        self._fig = self._drawer = None
        if self.server is not None and self._owns_server:
            self.server.close()
            self.server.remove_log()


def _bye(client: UdpClient) -> None:
    try:
        client.send(P.pack_bye(client.next_seq(), client.session))
    except OSError:
        pass
    client.close()


def _copy_box(box: gymnasium.spaces.Box) -> gymnasium.spaces.Box:
    """An equal Box with its own random generator (each agent's space seeds separately)."""
    return gymnasium.spaces.Box(box.low, box.high, box.shape, box.dtype)  # type: ignore[arg-type]


def make_parallel_env(**kwargs: Any) -> BrawlpitParallelEnv:
    """``BrawlpitParallelEnv(**kwargs)``; also exported as ``brawlkit.make_parallel_env``."""
    return BrawlpitParallelEnv(**kwargs)
