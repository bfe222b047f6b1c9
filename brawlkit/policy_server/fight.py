"""One fight through a ``/move`` endpoint: the client, the env, the seats and the loop.

Shared by ``policy play`` (:mod:`brawlkit.policy_server.player`), the rollout workers
(:mod:`brawlkit.policy_server.rollouts`) and the trainer: one loop, so a fight that is
rated and a fight that is learned from are played by the same rules (docs/move.md,
"How the worker plays"):

* **Ask.** The state, the last four moves and the state's *available* moves
  (:func:`~brawlkit.policy_server.moves.available_moves`) go to ``POST /move``; the call
  is timed.
* **Delay.** The move takes effect ``reaction_frames + ceil(latency_s × 60)`` ticks
  after the state it answers (at least 1 tick of latency): a fixed human reaction, as
  in the write-up, plus what the model really took.  The lockstep server waits while
  the model thinks, so a fight is deterministic given the latencies.
* **Invalid.** An answer that names no available move (an unknown name, a move the
  state does not offer, or no usable answer at all) is played as ``no_move`` and
  marked ``invalid``; the rewards penalise it.
* **Opponents.** The server's CPU, a league member's ``.bpw`` (a callable of the env's
  contract) or another endpoint (:class:`EndpointSeat`), each a real client of the
  arena.
* **Void.** A fight whose endpoint fails ``max_failed_streak`` calls in a row, or that
  outlives its wall-clock ``deadline``, raises :class:`FightVoid`: its data are not a
  fight of the model's and are never learned from or rated.
"""

from __future__ import annotations

import http.client
import json
import math
import socket
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from brawlkit.env.actions import decode_action
from brawlkit.env.brawlpit import BrawlpitEnv, EnvError
from brawlkit.env.observation import INPUT_LAYOUT_WIDEST
from brawlkit.env.rewards import _damage_deltas
from brawlkit.env.udp_client import UdpClient
from brawlkit.policy_server.move_reward import hp_diff
from brawlkit.policy_server.moves import BY_NAME, FIRE_BUTTONS, HISTORY, NO_MOVE, Command, Move
from brawlkit.policy_server.policy import request_json
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import Snapshot

#: reply keys besides ``move`` / ``logprob`` that the worker keeps for a trainer: the
#: response's token ids and their logprobs, the prompt the model read, its raw text
#: ``messages`` / ``prompt_ids``: exactly what a language model read (system, user, re-asks),
#: ``asks``: how many calls the answer took (docs/move_training.md, "A language model")
REPLY_EXTRAS = ("tokens", "token_logprobs", "prompt", "response", "messages", "prompt_ids", "asks")
TICK_HZ = int(C.BP_TICK_HZ)
#: decision period when neither --decision-ticks nor the endpoint's /info says one
DEFAULT_DECISION_TICKS = 4
#: reward subtracted per answer replaced by no_move (unknown move, failed call)
INVALID_MOVE_PENALTY = 0.05
#: the longest delay a call can cause (a lockstep server refuses commands further ahead)
MAX_DELAY_TICKS = int(C.BP_MAX_CMD_LEAD)


def latency_ticks(latency_s: float) -> int:
    """Ticks a move waits for a call that took ``latency_s``: ``ceil(latency_s × 60)``,
    at least 1, at most :data:`MAX_DELAY_TICKS`."""
    return min(MAX_DELAY_TICKS, max(1, math.ceil(latency_s * TICK_HZ)))


@dataclass
class Answer:
    """One call: the move name as answered (None if there was no usable answer).
    ``error``: why there was none, or — with a move — the model's own failures the
    endpoint reported (an LLM adapter's HTTP 500s and malformed bodies)."""

    move: str | None
    logprob: float | None
    latency_s: float
    error: str | None = None
    #: what else the reply said that a trainer wants (``tokens``, ``token_logprobs``,
    #: ``prompt``, ``response``): :data:`REPLY_EXTRAS`
    extra: dict[str, Any] = field(default_factory=dict)


class MoveEndpoint:
    """An HTTP client of one ``/move`` endpoint over a kept-alive connection."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"--endpoint must be an http(s) URL like http://127.0.0.1:8000, "
                             f"got {url!r}")
        base = u.path.rstrip("/")
        if base.endswith("/move"):
            base = base[: -len("/move")]
        self.url, self.base, self.timeout = url, base, timeout
        self._scheme, self._host = u.scheme, u.hostname
        self._port = u.port or (443 if u.scheme == "https" else 80)
        self._conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        conn.connect()
        assert conn.sock is not None
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle wait per call
        return conn

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """(status, body); a dropped kept-alive connection is re-opened once."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (0, 1):
            fresh = self._conn is None
            try:
                if self._conn is None:
                    self._conn = self._connect()
                self._conn.request(method, self.base + path, body=body, headers=headers)
                resp = self._conn.getresponse()
                data = resp.read()
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                return resp.status, data
            except (http.client.HTTPException, ConnectionError) as e:
                self.close()
                if fresh or attempt:
                    raise OSError(f"{method} {path}: {e}") from e
            except OSError:
                self.close()
                raise
        raise AssertionError("unreachable")

    def info(self) -> dict[str, Any]:
        """``GET /info`` (optional in the contract: {} when the endpoint has none)."""
        try:
            status, data = self.request("GET", "/info")
            out = json.loads(data) if status == 200 else {}
        except (OSError, ValueError):
            return {}
        return out if isinstance(out, dict) else {}

    def ask(self, body: dict[str, Any]) -> Answer:
        """``POST /move``; never raises: a failure is an :class:`Answer` with ``error``."""
        payload = json.dumps(body).encode()
        t0 = time.perf_counter()
        try:
            status, data = self.request("POST", "/move", payload)
            reply = json.loads(data) if status == 200 else None
            error = None if status == 200 else f"HTTP {status}: {data[:200]!r}"
        except (OSError, ValueError) as e:
            reply, error = None, f"{type(e).__name__}: {e}"
        latency = time.perf_counter() - t0
        if error is None and not (isinstance(reply, dict) and isinstance(reply.get("move"), str)):
            error = f"reply is not an object with a string 'move': {str(reply)[:200]}"
        if error is not None:
            return Answer(None, None, latency, error)
        assert isinstance(reply, dict)
        lp = reply.get("logprob")
        logprob = float(lp) if isinstance(lp, int | float) and not isinstance(lp, bool) else None
        extra = {k: reply[k] for k in REPLY_EXTRAS if k in reply}
        # a model's own failure behind a 200 (an LLM adapter whose server answered 500 or
        # garbage): the endpoint still answered, so it is no failed call, but it is counted
        model_err = reply.get("error")
        return Answer(reply["move"], logprob, latency, error=str(model_err)[:300] if model_err else None,
                      extra=extra)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class MoveEnv(BrawlpitEnv):
    """A :class:`BrawlpitEnv` stepped by explicit command stretches instead of one
    action per fixed repeat: what playing named moves with a variable delay needs.

    The opponent in slot 1 is the server's CPU (nothing to send), or a second client
    of this arena: a :class:`Seat` (another ``/move`` endpoint) or a callable of the
    env's contract (a league member's ``.bpw``: observation -> action), which decides
    every ``opponent_period`` ticks — so a stretch is played in chunks of that length,
    each chunk one lockstep step of both clients.

    Its inputs are only the opponent's, so it builds the widest layout by default: a
    policy of any layout reads its own first values of it."""

    opponent_period: int = 4

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("input_layout", INPUT_LAYOUT_WIDEST)
        super().__init__(**kwargs)

    def advance(self, segments: list[tuple[int, int, Command]]) -> Snapshot:
        """Send ``(start tick, ticks, command)`` stretches covering the ticks from the
        current one on, contiguously, and return the snapshot after the last."""
        me, snap = self._me, self._snap
        if me is None or snap is None:
            raise EnvError("advance() before reset()")
        if snap.over:
            raise EnvError("advance() after the match ended: call reset()")
        if not segments or segments[0][0] != snap.tick:
            raise ValueError(f"the stretches must start at the current tick {snap.tick}")
        if self._op is None:
            return self._step_stretches(segments, None)
        end = segments[-1][0] + segments[-1][1]
        period = max(1, int(getattr(self._op_fn, "period", self.opponent_period)))
        cur = snap
        while cur.tick < end and not cur.over:
            n = min(period, end - cur.tick)
            cur = self._step_stretches(_clip_stretches(segments, cur.tick, cur.tick + n),
                                       self._opponent_stretches(cur, n))
        return cur

    def _opponent_stretches(self, snap: Snapshot, n: int) -> list[tuple[int, int, Command]]:
        """Slot 1's commands for the next ``n`` ticks: a seat's own stretches, or the
        callable's action for this observation held for the chunk."""
        fn = self._op_fn
        if isinstance(fn, Seat):
            return fn.stretches(snap, snap.tick, n)
        assert fn is not None
        cmd = decode_action(np.asarray(fn(self._observe(snap, 1)), np.float32))
        self._prev[1] = cmd
        return [(snap.tick, n, cmd)]

    def _step_stretches(self, mine: list[tuple[int, int, Command]],
                        theirs: list[tuple[int, int, Command]] | None) -> Snapshot:
        me, snap = self._me, self._snap
        assert me is not None and snap is not None
        total = _send_stretches(me, mine)
        if theirs is not None:
            assert self._op is not None
            _send_stretches(self._op, theirs)
        self.action_repeat = total  # what _recv_step waits for: the snapshot after them all
        cur = self._recv_step(snap)
        self._snap = cur
        self._prev[0] = mine[-1][2]
        return cur


def _send_stretches(client: UdpClient, segments: list[tuple[int, int, Command]]) -> int:
    """CMDs for ``(start, ticks, command)`` stretches (split at the protocol's repeat
    limit); kept in ``client.last_cmds`` for re-sending.  Returns the ticks covered."""
    client.last_cmds = []
    total = 0
    for start, n, (sx, sy, buttons) in segments:
        while n > 0:
            k = min(n, int(C.BP_MAX_REPEAT))
            client.cmd_seq += 1
            pkt = P.pack_cmd(client.next_seq(), client.session, start, client.cmd_seq, sx, sy,
                             buttons, client.slot, k)
            client.last_cmds.append(pkt)
            client.send(pkt)
            start, n, total = start + k, n - k, total + k
    return total


def _clip_stretches(segments: list[tuple[int, int, Command]], lo: int, hi: int
                    ) -> list[tuple[int, int, Command]]:
    """The part of ``segments`` inside ticks ``[lo, hi)``."""
    out = []
    for start, n, cmd in segments:
        a, b = max(start, lo), min(start + n, hi)
        if b > a:
            out.append((a, b - a, cmd))
    return out


def stretches(active: list[tuple[int, Move]], start: int, end: int) -> list[tuple[int, int, Command]]:
    """The commands of ticks [start, end) as (tick, ticks, command) runs: at each tick
    the latest move that has taken effect (``active`` = (effective tick, move), in
    order) plays its frame for that tick, or its hold once the frames are done.

    A move's presses are fresh presses: JUMP / ATTACK / SPECIAL fire on a press, so
    when a move takes effect pressing a button the tick before still holds (``jump``
    right after ``jump``), that button is released on the tick before."""
    cmds: list[Command] = []
    starts: set[int] = set()
    j = 0
    for t in range(start, end):
        while j + 1 < len(active) and active[j + 1][0] <= t:
            j += 1
        eff, mv = active[j]
        if eff == t:
            starts.add(t)
        cmds.append(mv.command_at(t - eff))
    for t in starts:
        i = t - start
        if i > 0 and (clash := cmds[i - 1][2] & cmds[i][2] & FIRE_BUTTONS):
            sx, sy, b = cmds[i - 1]
            cmds[i - 1] = (sx, sy, b & ~clash)
    out: list[tuple[int, int, Command]] = []
    for i, c in enumerate(cmds):
        if out and out[-1][2] == c:
            out[-1] = (out[-1][0], out[-1][1] + 1, c)
        else:
            out.append((start + i, 1, c))
    return out


class Seat:
    """Slot 1 played by something that needs the whole snapshot, not the env's
    observation (another ``/move`` endpoint): :class:`MoveEnv` asks it for each chunk's
    command stretches.  Callable only so the env seats a second client for it."""

    label = "seat"
    #: ticks between its decisions (the chunk length of :meth:`MoveEnv.advance`)
    period = 4

    def __call__(self, obs: np.ndarray) -> np.ndarray:  # the env's contract; never used
        return np.zeros(6, np.float32)

    def reset(self) -> None:
        """A new fight starts."""

    def stretches(self, snap: Snapshot, start: int, n: int) -> list[tuple[int, int, Command]]:
        raise NotImplementedError


class EndpointSeat(Seat):
    """Another ``/move`` endpoint as the opponent, played by the same rules as the model
    (its state mirrored: ``self`` is slot 1; its latency and ``reaction_frames`` delay
    its moves; an invalid answer is ``no_move``)."""

    def __init__(self, url: str, decision_ticks: int = 4, reaction_frames: int = 0,
                 timeout: float = 5.0) -> None:
        self.endpoint = MoveEndpoint(url, timeout=timeout)
        self.label = f"endpoint:{url}"
        self.period = int(decision_ticks)
        self.reaction_frames = int(reaction_frames)
        self.reset()

    def reset(self) -> None:
        self.active: list[tuple[int, Move]] = [(0, BY_NAME[NO_MOVE])]
        self.history: list[str] = []
        self.next_decision = 0

    def stretches(self, snap: Snapshot, start: int, n: int) -> list[tuple[int, int, Command]]:
        if start >= self.next_decision:
            body = request_json(snap.players[1], snap.players[0], start, snap.ticks_left,
                                self.history)
            ans = self.endpoint.ask(body)
            name, _ = judge(ans.move, body["available"])
            d = delay_ticks(ans.latency_s, self.reaction_frames)
            self.active.append((start + d, BY_NAME[name]))
            self.history = (self.history + [name])[-HISTORY:]
            self.next_decision = start + max(self.period, d)
        while len(self.active) > 1 and self.active[1][0] <= start:
            self.active.pop(0)
        return stretches(self.active, start, start + n)


def delay_ticks(latency_s: float, reaction_frames: int = 0) -> int:
    """Ticks between a state and the move answering it: the fixed reaction plus the
    call's latency in ticks (:func:`latency_ticks`), at most :data:`MAX_DELAY_TICKS`."""
    return min(MAX_DELAY_TICKS, int(reaction_frames) + latency_ticks(latency_s))


class FightVoid(Exception):
    """The fight cannot count: the endpoint failed too often or the fight ran too long."""


@dataclass
class MoveStep:
    """One decision of a fight: what was asked, answered and played, and what the frames
    it owned (until the next decision) did.  ``hp_diff`` is
    :func:`~brawlkit.policy_server.move_reward.hp_diff` of those frames."""

    tick: int
    frames: int
    delay: int
    answer: str | None
    move: str
    invalid: bool
    failed: bool
    logprob: float | None
    latency_ms: float
    dealt: float
    taken: float
    stocks_taken: int
    stocks_lost: int
    hp_diff: float
    state: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def judge(answer: str | None, available: list[str]) -> tuple[str, bool]:
    """(the move played, whether the answer was invalid): an answer naming no available
    move — unknown, not offered in this state, or missing — plays ``no_move``."""
    if answer is not None and answer in available:
        return answer, False
    return NO_MOVE, True


def _step(snap: Snapshot, cur: Snapshot, body: dict[str, Any], ans: Answer, name: str,
          invalid: bool, d: int) -> MoveStep:
    me0, op0 = snap.players
    me1, op1 = cur.players
    dealt, taken = _damage_deltas(snap, cur, 0)
    return MoveStep(
        tick=snap.tick, frames=cur.tick - snap.tick, delay=d, answer=ans.move, move=name,
        invalid=invalid, failed=ans.move is None, logprob=ans.logprob,
        latency_ms=round(ans.latency_s * 1e3, 3), dealt=dealt, taken=taken,
        stocks_taken=max(0, op0.stocks - op1.stocks), stocks_lost=max(0, me0.stocks - me1.stocks),
        hp_diff=hp_diff(snap, cur, 0), state=body, extra=ans.extra, error=ans.error)


def play_fight(endpoint: MoveEndpoint, env: MoveEnv, *, seed: int, decision_ticks: int,
               reaction_frames: int = 0, max_ticks: int | None = None,
               frames: Callable[[Snapshot], str] | None = None, opponent: Any = None,
               deadline: float | None = None, max_failed_streak: int | None = None,
               on_step: Callable[[Snapshot, Snapshot, MoveStep], None] | None = None,
               ) -> tuple[list[MoveStep], Snapshot]:
    """Play one fight of the endpoint (slot 0) against ``opponent`` (default: the env's);
    returns its moves and the last snapshot.  ``deadline`` is a ``time.monotonic()``
    instant; ``on_step(prev, cur, step)`` sees every move as it is played."""
    if isinstance(opponent, Seat):
        opponent.reset()
    env.reset(seed=seed, options=None if opponent is None else {"opponent": opponent})
    snap = env.last_snapshot
    assert snap is not None
    active: list[tuple[int, Move]] = [(0, BY_NAME[NO_MOVE])]
    history: list[str] = []
    steps: list[MoveStep] = []
    streak = 0
    while not snap.over and (max_ticks is None or snap.tick < max_ticks):
        if deadline is not None and time.monotonic() > deadline:
            raise FightVoid(f"the fight outlived its deadline at tick {snap.tick}")
        t = snap.tick
        body = request_json(snap.players[0], snap.players[1], t, snap.ticks_left, history)
        ans = endpoint.ask(body if frames is None else {**body, "frame": frames(snap)})
        streak = streak + 1 if ans.move is None else 0
        if max_failed_streak is not None and streak >= max_failed_streak:
            raise FightVoid(f"{streak} calls in a row failed, the last: {ans.error}")
        name, invalid = judge(ans.move, body["available"])
        d = delay_ticks(ans.latency_s, reaction_frames)
        span = max(decision_ticks, d)
        if max_ticks is not None:
            span = max(1, min(span, max_ticks - t))
        active.append((t + d, BY_NAME[name]))
        while len(active) > 1 and active[1][0] <= t:  # moves wholly superseded before t
            active.pop(0)
        cur = env.advance(stretches(active, t, t + span))
        step = _step(snap, cur, body, ans, name, invalid, d)
        if on_step is not None:
            on_step(snap, cur, step)
        steps.append(step)
        history = (history + [name])[-HISTORY:]
        snap = cur
    return steps, snap


__all__ = ["Answer", "EndpointSeat", "EnvError", "FightVoid", "MoveEndpoint", "MoveEnv",
           "MoveStep", "Seat", "judge", "latency_ticks", "play_fight", "stretches"]
