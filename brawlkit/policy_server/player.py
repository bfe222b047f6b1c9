"""The worker that plays BRAWLPIT through a ``/move`` endpoint (docs/move.md).

``python -m brawlkit policy play --endpoint URL --vs cpu:L`` plays whole lockstep
matches on a real ``brawlpit_server``: at each decision it sends the state to the
endpoint, measures how long the answer took, and lets the move take effect only
that long later in game time, so a slow model plays at its real speed:

* **Latency -> frames.** A call that took ``latency_s`` seconds delays its move by
  ``d = ceil(latency_s × 60)`` ticks (at least 1: no answer is instantaneous),
  through the CMD's ``tick`` field (docs/protocol.md, "Input delay"): the decision
  made at observation tick T is sent with ``tick = T + d``, and the ticks before
  it keep playing the previous move.  The game is paused while the endpoint thinks
  (lockstep), so a match is deterministic given the latencies, which the worker
  reports call by call (``--trace``).
* **Decision period.** The next observation is taken ``max(decision_ticks, d)``
  ticks later: a model decides every ``decision_ticks`` ticks (the checkpoint's
  action repeat, from ``GET /info``, else 4), and never before its previous
  answer has arrived — a model that needs 200 ms decides 5 times a second.
* **Unknown moves.** An answer that is not one of the declared moves (or no
  answer: an HTTP error, a timeout, a body without a ``move`` string) is replaced
  by ``no_move``, counted (``invalid_moves`` / ``failed_calls``) and penalised:
  ``--invalid-penalty`` (default 0.05, a twentieth of a stock) is subtracted from
  the reported reward per replaced answer.  The reward is the env's outcome reward
  (:class:`brawlkit.env.rewards.OutcomeReward`: damage, stocks, ±3 for the result)
  summed over the match, minus the penalties.
* **Ratings.** A finished match is written as a :class:`MatchRecord` (source
  ``move``) to ``--league-dir`` under the endpoint's member id (``--member``, or
  the member ``GET /info`` names: ``policy serve`` finds it when the checkpoint is
  a league artifact), so ``python -m brawlkit elo`` rates it with the league.  A
  match cut short by ``--max-ticks`` is reported but never recorded.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import socket
import sys
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from brawlkit.env.brawlpit import BrawlpitEnv, EnvError, parse_opponent
from brawlkit.env.rewards import OutcomeReward, match_outcome
from brawlkit.policy_server.moves import BY_NAME, FIRE_BUTTONS, NAMES, NO_MOVE, Command, Move
from brawlkit.policy_server.policy import request_json
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import Snapshot

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
    """One call: the move name as answered (None if there was no usable answer)."""

    move: str | None
    logprob: float | None
    latency_s: float
    error: str | None = None


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
        return Answer(reply["move"], logprob, latency)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class MoveEnv(BrawlpitEnv):
    """A :class:`BrawlpitEnv` stepped by explicit command stretches instead of one
    action per fixed repeat: what playing named moves with a variable delay needs."""

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
        me.last_cmds = []
        total = 0
        for start, n, (sx, sy, buttons) in segments:
            while n > 0:
                k = min(n, int(C.BP_MAX_REPEAT))
                me.cmd_seq += 1
                pkt = P.pack_cmd(me.next_seq(), me.session, start, me.cmd_seq, sx, sy, buttons,
                                 me.slot, k)
                me.last_cmds.append(pkt)
                me.send(pkt)
                start, n, total = start + k, n - k, total + k
        self.action_repeat = total  # what _recv_step waits for: the snapshot after them all
        cur = self._recv_step(snap)
        self._snap = cur
        self._prev[0] = segments[-1][2]
        return cur


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


class FrameRenderer:
    """Draws a snapshot as the replay renderer does and encodes it as base64 PNG: the
    request's optional ``frame`` (``--frames``), for models that look at the game.
    Rendering happens before the call and is not charged to the model's latency."""

    def __init__(self, dpi: int = 40) -> None:
        from brawlkit.replay.render import FrameDrawer, new_figure  # matplotlib: only when used

        self.fig, ax = new_figure(dpi=dpi)
        self.drawer = FrameDrawer(ax, ("self", "opponent"))

    def __call__(self, snap: Snapshot) -> str:
        import base64
        import io

        from brawlkit.replay.play import TickState

        self.drawer.update(TickState(snap.tick, snap.ticks_left, snap.phase, snap.winner, snap.players))
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", facecolor=self.fig.get_facecolor())
        return base64.b64encode(buf.getvalue()).decode("ascii")


def _stats(values: list[float], scale: float = 1.0, digits: int = 3) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "p50": None, "p95": None, "min": None, "max": None}
    a = np.asarray(values, np.float64) * scale
    return {"mean": round(float(a.mean()), digits), "p50": round(float(np.percentile(a, 50)), digits),
            "p95": round(float(np.percentile(a, 95)), digits), "min": round(float(a.min()), digits),
            "max": round(float(a.max()), digits)}


def play_match(endpoint: MoveEndpoint, env: MoveEnv, *, seed: int, decision_ticks: int,
               max_ticks: int | None = None, invalid_penalty: float = INVALID_MOVE_PENALTY,
               trace: TextIO | None = None, frames: FrameRenderer | None = None) -> dict[str, Any]:
    """One match of the endpoint (slot 0) against ``env``'s opponent; its report."""
    env.reset(seed=seed)
    snap = env.last_snapshot
    assert snap is not None
    reward_fn = OutcomeReward()
    reward_fn.reset(snap, 0)
    active: list[tuple[int, Move]] = [(0, BY_NAME[NO_MOVE])]
    history: list[str] = []
    latencies: list[float] = []
    delays: list[int] = []
    moves: Counter[str] = Counter()
    invalid = failed = 0
    outcome_reward = 0.0
    errors: Counter[str] = Counter()
    while not snap.over and (max_ticks is None or snap.tick < max_ticks):
        t = snap.tick
        frame = frames(snap) if frames is not None else None
        ans = endpoint.ask(request_json(snap.players[0], snap.players[1], t, snap.ticks_left, history,
                                        frame))
        d = latency_ticks(ans.latency_s)
        name = ans.move
        penalised = False
        if name is None:
            failed += 1
            errors[str(ans.error)[:120]] += 1
            name, penalised = NO_MOVE, True
        elif name not in BY_NAME:
            invalid += 1
            name, penalised = NO_MOVE, True
        mv = BY_NAME[name]
        span = max(decision_ticks, d)
        if max_ticks is not None:
            span = max(1, min(span, max_ticks - t))
        active.append((t + d, mv))
        while len(active) > 1 and active[1][0] <= t:  # moves wholly superseded before t
            active.pop(0)
        cur = env.advance(stretches(active, t, t + span))
        r, _ = reward_fn(snap, cur, 0, cur.tick - t, mv.action_vector())
        outcome_reward += r
        step_reward = r - (invalid_penalty if penalised else 0.0)
        if trace is not None:
            trace.write(json.dumps({"tick": t, "answer": ans.move, "move": name,
                                    "logprob": ans.logprob, "latency_ms": round(ans.latency_s * 1e3, 3),
                                    "delay_ticks": d, "reward": step_reward, "error": ans.error}) + "\n")
        latencies.append(ans.latency_s)
        delays.append(d)
        moves[name] += 1
        history = (history + [name])[-4:]
        snap = cur
    me, op = snap.players
    penalty = invalid_penalty * (invalid + failed)
    return {
        "seed": seed,
        "outcome": match_outcome(snap, 0),
        "over": snap.over,
        "ticks": snap.tick,
        "decisions": len(delays),
        "decision_ticks": decision_ticks,
        "invalid_moves": invalid,
        "failed_calls": failed,
        "errors": dict(errors),
        "penalty": round(penalty, 6),
        "outcome_reward": round(outcome_reward, 6),
        "reward": round(outcome_reward - penalty, 6),
        "latency_ms": _stats(latencies, 1e3),
        "delay_ticks": _stats([float(x) for x in delays]),
        "delay_ticks_total": int(sum(delays)),
        "moves": dict(moves.most_common()),
        "self_stocks": me.stocks, "other_stocks": op.stocks,
        "self_damage": round(me.damage, 3), "other_damage": round(op.damage, 3),
    }


def _check_member(member: str) -> str | None:
    """Why ``member`` cannot be the endpoint's id in the match log (None = fine)."""
    from brawlkit.league.records import is_reserved_id, permanent_ids

    if not member or "/" in member or member.startswith("."):
        return f"--member {member!r} is not a plain name"
    if member in permanent_ids():
        return f"--member {member!r} is a permanent member (the baseline or a CPU level)"
    if is_reserved_id(member):
        return f"--member {member!r} is reserved for human players"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m brawlkit policy play",
        description="Play whole lockstep matches on a real brawlpit_server through a /move "
        "endpoint (docs/move.md). Each call's latency delays its move by ceil(latency_s*60) "
        "ticks; an unknown move is replaced by no_move, counted and penalised; finished "
        "matches are recorded in --league-dir under the endpoint's member id for `elo`.")
    ap.add_argument("--endpoint", required=True, help="base URL of the endpoint, e.g. http://127.0.0.1:8000")
    ap.add_argument("--vs", default="cpu:3", help="opponent: cpu:L, L in 1..8 (default cpu:3)")
    ap.add_argument("--matches", type=int, default=1, help="matches to play (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first match; match i uses seed+i")
    ap.add_argument("--league-dir", default=None, help="record finished matches in this league directory")
    ap.add_argument("--member", default=None,
                    help="the endpoint's member id in the match log (default: the one GET /info names)")
    ap.add_argument("--decision-ticks", type=int, default=None,
                    help=f"ticks between decisions (default: GET /info's decision_ticks, else "
                         f"{DEFAULT_DECISION_TICKS})")
    ap.add_argument("--invalid-penalty", type=float, default=INVALID_MOVE_PENALTY,
                    help=f"reward subtracted per answer replaced by no_move (default {INVALID_MOVE_PENALTY})")
    ap.add_argument("--max-ticks", type=int, default=None,
                    help="stop each match after this many ticks (a cut match is reported, never recorded)")
    ap.add_argument("--timeout", type=float, default=5.0, help="seconds one call may take (default 5)")
    ap.add_argument("--server", default=None,
                    help="HOST:PORT of a running lockstep brawlpit_server (default: start one)")
    ap.add_argument("--frames", action="store_true",
                    help="send a rendered frame (base64 PNG, 224 px wide) with every request")
    ap.add_argument("--trace", default=None, help="write one JSON line per decision to this file")
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last stdout line")
    args = ap.parse_args(argv)

    try:
        level, _, opp_label = parse_opponent(args.vs)
    except ValueError as e:
        ap.error(f"--vs: {e}")
    if not isinstance(args.vs, str) or not args.vs.startswith("cpu:"):
        ap.error("--vs must be cpu:L")
    if args.matches < 1:
        ap.error(f"--matches must be >= 1, got {args.matches}")
    if args.max_ticks is not None and args.max_ticks < 1:
        ap.error(f"--max-ticks must be >= 1, got {args.max_ticks}")
    if not (math.isfinite(args.invalid_penalty) and args.invalid_penalty >= 0):
        ap.error(f"--invalid-penalty must be a finite number >= 0, got {args.invalid_penalty}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        ap.error(f"--timeout must be > 0, got {args.timeout}")
    try:
        endpoint = MoveEndpoint(args.endpoint, timeout=args.timeout)
    except ValueError as e:
        ap.error(str(e))
    info = endpoint.info()
    try:  # fail fast on an endpoint that is not there at all
        endpoint.request("GET", "/moves")
    except OSError as e:
        print(f"policy play: no endpoint at {args.endpoint}: {e}", file=sys.stderr)
        return 2
    decision_ticks = args.decision_ticks or info.get("decision_ticks") or DEFAULT_DECISION_TICKS
    if not isinstance(decision_ticks, int) or not 1 <= decision_ticks <= C.BP_MAX_REPEAT:
        ap.error(f"decision ticks must be an integer in 1..{C.BP_MAX_REPEAT}, got {decision_ticks!r}")
    member = args.member or (info.get("member") if isinstance(info.get("member"), str) else None)
    writer = None
    if args.league_dir is not None:
        if not member:
            ap.error("--league-dir needs the endpoint's member id: pass --member ID (the endpoint's "
                     "GET /info names none)")
        problem = _check_member(member)
        if problem:
            ap.error(problem)
        from brawlkit.league.directory import LeagueDir

        writer = LeagueDir(args.league_dir).writer("move")
    server_address = None
    if args.server:
        host, _, port = args.server.rpartition(":")
        if not host or not port.isdigit():
            ap.error(f"--server must be HOST:PORT, got {args.server!r}")
        server_address = (host, int(port))
    trace = open(args.trace, "w") if args.trace else None  # noqa: SIM115 - closed below
    env = MoveEnv(mode="lockstep", action_repeat=decision_ticks, opponent=args.vs, input_layout=1,
                  server_address=server_address, recv_timeout=max(5.0, args.timeout + 1.0))
    frames = FrameRenderer() if args.frames else None
    results: list[dict[str, Any]] = []
    try:
        for i in range(args.matches):
            res = play_match(endpoint, env, seed=args.seed + i, decision_ticks=decision_ticks,
                             max_ticks=args.max_ticks, invalid_penalty=args.invalid_penalty, trace=trace,
                             frames=frames)
            res["match"] = i
            res["opponent"] = opp_label
            res["recorded"] = False
            if writer is not None and res["over"] and res["outcome"] is not None:
                from brawlkit.league.records import MatchRecord

                assert member is not None
                writer.write(MatchRecord(time=time.time(), a=member, b=f"cpu:{level}",
                                         result=res["outcome"], ticks=res["ticks"], source="move"))
                res["recorded"] = True
            results.append(res)
            lat = res["latency_ms"]
            print(f"match {i}: {res['outcome'] or 'cut'} vs {opp_label} in {res['ticks']} ticks, "
                  f"{res['decisions']} decisions, latency {lat['mean']} ms mean -> "
                  f"{res['delay_ticks']['mean']} ticks delay, {res['invalid_moves']} invalid, "
                  f"{res['failed_calls']} failed, reward {res['reward']:.3f}"
                  + (" (recorded)" if res["recorded"] else ""), file=sys.stderr if args.json else sys.stdout)
    except EnvError as e:
        print(f"policy play: {e}", file=sys.stderr)
        return 1
    finally:
        env.close()
        endpoint.close()
        if writer is not None:
            writer.close()
        if trace is not None:
            trace.close()
    summary = {"endpoint": args.endpoint, "member": member, "opponent": opp_label,
               "decision_ticks": decision_ticks, "invalid_penalty": args.invalid_penalty,
               "league_dir": str(Path(args.league_dir)) if args.league_dir else None,
               "writer": writer.name if writer is not None else None, "moves_known": len(NAMES),
               "matches": results}
    if args.json:
        print(json.dumps(summary))
    return 0
