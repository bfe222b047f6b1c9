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
* **Invalid moves.** An answer that is not one of the state's *available* moves (an
  unknown name, a move the state does not offer — ``unavailable_moves`` counts those —
  or no answer: an HTTP error, a timeout, a body without a ``move`` string) is
  replaced by ``no_move``, counted (``invalid_moves`` / ``failed_calls``) and penalised:
  ``--invalid-penalty`` (default 0.05, a twentieth of a stock) is subtracted from
  the reported reward per replaced answer.  The reward is the env's outcome reward
  (:class:`brawlkit.env.rewards.OutcomeReward`: damage, stocks, ±3 for the result)
  summed over the match, minus the penalties.
* **Reaction.** ``--reaction-frames F`` adds a fixed human reaction of F ticks to
  every call's latency (default 0).
* **Ratings.** A finished match is written as a :class:`MatchRecord` (source
  ``move``) to ``--league-dir`` and/or posted to ``--registry`` under the endpoint's
  member id (``--member``, or
  the member ``GET /info`` names: ``policy serve`` finds it when the checkpoint is
  a league artifact), so ``python -m brawlkit elo`` rates it with the league.  A
  match cut short by ``--max-ticks`` is reported but never recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from typing import Any, TextIO

import numpy as np

from brawlkit.common.cli_args import command_parser
from brawlkit.env.rewards import OutcomeReward, match_outcome
from brawlkit.league.records import MAX_SEED
from brawlkit.policy_server.fight import (  # noqa: F401 - re-exported: the worker's names
    Answer,
    EnvError,
    MoveEndpoint,
    MoveEnv,
    MoveStep,
    latency_ticks,
    play_fight,
    stretches,
)
from brawlkit.policy_server.moves import NAMES
from brawlkit.policy_server.results import ResultSink, member_problem
from brawlkit.policy_server.rollouts import resolve_opponent
from brawlkit.wire.constants import C
from brawlkit.wire.protocol import Snapshot

#: decision period when neither --decision-ticks nor the endpoint's /info says one
DEFAULT_DECISION_TICKS = 4
#: reward subtracted per answer replaced by no_move (unknown move, failed call)
INVALID_MOVE_PENALTY = 0.05


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


class _Tally:
    """The match report's running numbers: the env's outcome reward, the trace lines."""

    def __init__(self, first: Snapshot, invalid_penalty: float, trace: TextIO | None) -> None:
        self.reward_fn = OutcomeReward()
        self.reward_fn.reset(first, 0)
        self.outcome_reward = 0.0
        self.invalid_penalty, self.trace = invalid_penalty, trace

    def __call__(self, prev: Snapshot, cur: Snapshot, step: MoveStep) -> None:
        from brawlkit.policy_server.moves import BY_NAME

        r, _ = self.reward_fn(prev, cur, 0, cur.tick - prev.tick, BY_NAME[step.move].action_vector())
        self.outcome_reward += r
        if self.trace is not None:
            self.trace.write(json.dumps({
                "tick": step.tick, "answer": step.answer, "move": step.move, "logprob": step.logprob,
                "latency_ms": step.latency_ms, "delay_ticks": step.delay,
                "reward": r - (self.invalid_penalty if step.invalid else 0.0),
                "error": step.error}) + "\n")


def play_match(endpoint: MoveEndpoint, env: MoveEnv, *, seed: int, decision_ticks: int,
               max_ticks: int | None = None, invalid_penalty: float = INVALID_MOVE_PENALTY,
               trace: TextIO | None = None, frames: FrameRenderer | None = None,
               reaction_frames: int = 0, opponent: Any = None) -> dict[str, Any]:
    """One match of the endpoint (slot 0) against ``env``'s opponent; its report."""
    tally: list[_Tally] = []

    def on_step(prev: Snapshot, cur: Snapshot, step: MoveStep) -> None:
        if not tally:
            tally.append(_Tally(prev, invalid_penalty, trace))
        tally[0](prev, cur, step)

    steps, snap = play_fight(endpoint, env, seed=seed, decision_ticks=decision_ticks,
                             reaction_frames=reaction_frames, max_ticks=max_ticks, frames=frames,
                             opponent=opponent, on_step=on_step)
    me, op = snap.players
    failed = sum(s.failed for s in steps)
    invalid = sum(s.invalid and not s.failed for s in steps)
    penalty = invalid_penalty * (invalid + failed)
    outcome_reward = tally[0].outcome_reward if tally else 0.0
    return {
        "seed": seed, "outcome": match_outcome(snap, 0), "over": snap.over, "ticks": snap.tick,
        "decisions": len(steps), "decision_ticks": decision_ticks, "reaction_frames": reaction_frames,
        "invalid_moves": invalid,
        "unavailable_moves": sum(s.invalid and not s.failed and s.answer in NAMES for s in steps),
        "failed_calls": failed,
        # the endpoint answered, but its model had failed (an LLM server's 500, a malformed body)
        "model_errors": sum(s.error is not None and not s.failed for s in steps),
        "errors": dict(Counter(str(s.error)[:120] for s in steps if s.error is not None)),
        "penalty": round(penalty, 6), "outcome_reward": round(outcome_reward, 6),
        "reward": round(outcome_reward - penalty, 6),
        "latency_ms": _stats([s.latency_ms for s in steps]),
        "delay_ticks": _stats([float(s.delay) for s in steps]),
        "delay_ticks_total": int(sum(s.delay for s in steps)),
        "moves": dict(Counter(s.move for s in steps).most_common()),
        "self_stocks": me.stocks, "other_stocks": op.stocks,
        "self_damage": round(me.damage, 3), "other_damage": round(op.damage, 3),
    }


#: ``--vs active``: the registry's active checkpoint, looked up before every match
ACTIVE = "active"


class ActiveOpponent:
    """The registry's active checkpoint as the opponent (``--vs active --registry
    URL``): its blob fetched (LZ4 on the wire, sha256-checked) at the start and looked
    up again before each match, so ``registry activate OTHER`` changes the opponent of
    the next match without a restart; a blob already fetched is not fetched again."""

    def __init__(self, url: str) -> None:
        from brawlkit.registry.client import RegistryClient

        self.client = RegistryClient(url)
        self._cache: dict[str, tuple[Any, str]] = {}

    def current(self) -> tuple[Any, str]:
        from brawlkit.policy_server.rollouts import PolicyFileOpponent
        from brawlkit.registry.client import RegistryError

        try:
            rec = self.client.active()
            if rec is None:
                raise ValueError("active: no checkpoint is active (registry activate ID)")
            if rec["id"] not in self._cache:
                got = self.client.active_blob()
                if got is None or got[0]["id"] != rec["id"]:
                    raise ValueError(f"active: {rec['id']} has no blob (or changed meanwhile)")
                path = self.client.cache_dir / "active" / f"{rec['blob_sha256']}.bpw"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(got[1])
                opp = PolicyFileOpponent(path)
                self._cache[rec["id"]] = (opp, str(rec["id"]))
        except RegistryError as e:
            raise ValueError(f"active: {e}") from None
        return self._cache[rec["id"]]


def _parser() -> argparse.ArgumentParser:
    ap = command_parser(
        "policy play",
        "Play whole lockstep matches on a real brawlpit_server through a /move "
        "endpoint (docs/move.md). Each call's latency (plus --reaction-frames) delays its move; "
        "an answer naming no available move is replaced by no_move, counted and penalised; "
        "finished matches are recorded in --league-dir and/or --registry under the endpoint's "
        "member id for `elo`.")
    ap.add_argument("--endpoint", required=True, help="base URL of the endpoint, e.g. http://127.0.0.1:8000")
    ap.add_argument("--vs", default="cpu:3",
                    help="opponent: cpu:L (L in 1..8), baseline (the league's scripted "
                         "fighter), member:ID (a league member's .bpw; needs --league-dir), "
                         "endpoint:URL (another /move endpoint), a .bpw / .zip file (logged "
                         "as its name without the extension) or active (the --registry's "
                         "active checkpoint, looked up before each match); default cpu:3")
    ap.add_argument("--matches", type=int, default=1, help="matches to play (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the first match; match i uses seed+i")
    ap.add_argument("--league-dir", default=None, help="record finished matches in this league directory")
    ap.add_argument("--registry", default=None,
                    help="post finished matches to this registry (URL; BRAWLKIT_AGENT_ID/SECRET)")
    ap.add_argument("--member", default=None,
                    help="the endpoint's member id in the match log (default: the one GET /info names)")
    ap.add_argument("--decision-ticks", type=int, default=None,
                    help=f"ticks between decisions (default: GET /info's decision_ticks, else "
                         f"{DEFAULT_DECISION_TICKS})")
    ap.add_argument("--reaction-frames", type=int, default=0,
                    help="fixed reaction delay in ticks added to every call's latency (default 0)")
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
    return ap


def _check_args(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.matches < 1:
        ap.error(f"--matches must be >= 1, got {args.matches}")
    if args.max_ticks is not None and args.max_ticks < 1:
        ap.error(f"--max-ticks must be >= 1, got {args.max_ticks}")
    if not (math.isfinite(args.invalid_penalty) and args.invalid_penalty >= 0):
        ap.error(f"--invalid-penalty must be a finite number >= 0, got {args.invalid_penalty}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        ap.error(f"--timeout must be > 0, got {args.timeout}")
    if not 0 <= args.reaction_frames <= C.BP_MAX_CMD_LEAD // 2:
        ap.error(f"--reaction-frames must be in 0..{C.BP_MAX_CMD_LEAD // 2}")
    if args.server:
        host, _, port = args.server.rpartition(":")
        if not host or not port.isdigit():
            ap.error(f"--server must be HOST:PORT, got {args.server!r}")
        args.server = (host, int(port))


def _member(ap: argparse.ArgumentParser, args: argparse.Namespace, info: dict[str, Any]) -> str | None:
    member = args.member or (info.get("member") if isinstance(info.get("member"), str) else None)
    if args.league_dir is not None or args.registry is not None:
        if not member:
            ap.error("--league-dir / --registry need the endpoint's member id: pass --member ID "
                     "(the endpoint's GET /info names none)")
        if problem := member_problem(member):
            ap.error(f"--{problem}")
    return member


def _report(res: dict[str, Any], label: str, to: TextIO) -> None:
    lat = res["latency_ms"]
    print(f"match {res['match']}: {res['outcome'] or 'cut'} vs {label} in {res['ticks']} ticks, "
          f"{res['decisions']} decisions, latency {lat['mean']} ms mean -> "
          f"{res['delay_ticks']['mean']} ticks delay, {res['invalid_moves']} invalid, "
          f"{res['failed_calls']} failed, {res['model_errors']} model errors, reward {res['reward']:.3f}"
          + (" (recorded)" if res["recorded"] else ""), file=to)


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    _check_args(ap, args)
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
    member = _member(ap, args, info)
    follow = None
    if args.vs == ACTIVE:
        if not args.registry:
            ap.error("--vs active: the registry's active checkpoint needs --registry URL")
        follow = ActiveOpponent(args.registry)
    try:
        opponent, opp_id = (follow.current() if follow is not None else
                            resolve_opponent(args.vs, args.league_dir,
                                             reaction_frames=args.reaction_frames,
                                             timeout=args.timeout))
    except ValueError as e:
        ap.error(f"--vs: {e}")
    sink = ResultSink(args.league_dir, args.registry)
    trace = open(args.trace, "w") if args.trace else None  # noqa: SIM115 - closed below
    env = MoveEnv(mode="lockstep", action_repeat=decision_ticks, opponent="cpu:1",
                  server_address=args.server, recv_timeout=max(5.0, args.timeout + 1.0))
    frames = FrameRenderer() if args.frames else None
    results: list[dict[str, Any]] = []
    try:
        for i in range(args.matches):
            if follow is not None and i:  # before each match: a new active one is played
                opponent, opp_id = follow.current()
            res = play_match(endpoint, env, seed=args.seed + i, decision_ticks=decision_ticks,
                             max_ticks=args.max_ticks, invalid_penalty=args.invalid_penalty, trace=trace,
                             frames=frames, reaction_frames=args.reaction_frames, opponent=opponent)
            res.update(match=i, opponent=opp_id, recorded=False)
            if member and res["over"] and res["outcome"] is not None and (args.league_dir or args.registry):
                sink.post([sink.record(member, opp_id, res["outcome"], res["ticks"],
                                       seed=res["seed"] if 0 <= res["seed"] <= MAX_SEED else None)])
                res["recorded"] = True
            results.append(res)
            _report(res, opp_id, sys.stderr if args.json else sys.stdout)
    except EnvError as e:
        print(f"policy play: {e}", file=sys.stderr)
        return 1
    finally:
        env.close()
        endpoint.close()
        sink.close()
        if trace is not None:
            trace.close()
    summary = {"endpoint": args.endpoint, "member": member, "opponent": opp_id,
               "decision_ticks": decision_ticks, "invalid_penalty": args.invalid_penalty,
               "reaction_frames": args.reaction_frames, "league_dir": args.league_dir,
               "registry": args.registry, "writer": sink.name, "moves_known": len(NAMES),
               "sent": sink.counts, "failed_calls": sum(r["failed_calls"] for r in results),
               "model_errors": sum(r["model_errors"] for r in results), "matches": results}
    if args.json:
        print(json.dumps(summary))
    return 0
