"""Rollouts through ``/move``: many fights at once, each isolated, none fatal.

:class:`RolloutRunner` plays a batch of :class:`FightSpec` against a policy endpoint
with worker **processes**, each a real HTTP client of the endpoint and a real UDP
client of a ``brawlpit_server`` of its own (one arena per fight, the fight loop of
:func:`brawlkit.policy_server.fight.play_fight`).  It returns one :class:`FightResult`
per spec, in the specs' order: the fight's moves (state, answer, move played, logprob,
response tokens when the endpoint gives them, frames, damage dealt and taken,
invalid or not) and the outcome — or ``void`` with the reason:

* **a killed or crashed worker** (its pipe closes / the process is gone): that fight
  is void, a fresh worker takes its place;
* **a hung worker or endpoint**: a fight that outlives ``fight_timeout_s`` is void
  (the worker checks its own deadline between calls; past ``fight_timeout_s`` +
  ``grace_s`` the runner kills the worker); an endpoint failing
  ``max_failed_streak`` calls in a row voids the fight at once;
* **a server that dies**: the env notices within ~0.1 s (``EnvError``), the fight is
  void, the worker starts a new server for its next fight.

Void fights are counted (:attr:`RolloutRunner.voids`) and never learned from or rated;
a batch always completes.  The runner itself writes nothing: the trainer writes a
batch's export, match records and metrics only once :meth:`RolloutRunner.run` has
returned, so nothing is ever written half.

Why processes: a fight blocks on HTTP and UDP round trips, and a crash (or a hang in
C or in a socket) must not take the batch down.  The worker function is plain code
over a pipe, so a Ray actor can run the same :func:`_worker_loop`.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from brawlkit.env.brawlpit import EnvError
from brawlkit.env.observation import INPUT_LAYOUT_WIDEST
from brawlkit.policy_server.fight import (
    EndpointSeat,
    FightVoid,
    MoveEndpoint,
    MoveEnv,
    MoveStep,
    play_fight,
)
from brawlkit.wire.cpu_level import CpuLevel

MEMBER_PREFIX = "member:"
ENDPOINT_PREFIX = "endpoint:"


#: what ``--vs`` takes, for the messages that list it
OPPONENT_FORMS = "cpu:L (L in 1..8), baseline, member:ID, endpoint:URL or a .bpw / .zip file"


class PolicyFileOpponent:
    """A policy file as the opponent: a ``.bpw`` (raw or LZ4) or an SB3 checkpoint
    ``.zip``, playing its deterministic mean (clipped) — what ``brawlpit_bot`` and
    ``eval`` play; a sampled ``.bpw`` (version 3) with its noise, as the bot plays it —
    at the action repeat it was trained with, reading the first values of the env's
    input (every layout is the start of the widest, which ``MoveEnv`` builds)."""

    def __init__(self, path: Path, env_layout: int = INPUT_LAYOUT_WIDEST) -> None:
        from brawlkit.env.observation import INPUT_LAYOUTS, INPUT_NAMES
        from brawlkit.export.actor import NoiseStream, NumpyPolicy, load_checkpoint

        if path.suffix == ".zip":
            meta, policy = load_checkpoint(path)
            self.policy = NumpyPolicy.from_sb3(policy, meta)
        else:
            self.policy = NumpyPolicy(path)
        layout = self.policy.meta.input_layout
        if layout not in INPUT_LAYOUTS or \
                INPUT_NAMES[layout] != INPUT_NAMES[env_layout][:INPUT_LAYOUTS[layout]]:
            raise ValueError(f"{path}: reads policy input layout {layout}, which this player "
                             f"cannot build")
        self._n = INPUT_LAYOUTS[layout]
        self.period = max(1, int(self.policy.meta.action_repeat))
        self.label = path.stem
        self.noise = NoiseStream(0)

    def __call__(self, obs: Any) -> Any:
        import numpy as np

        return self.policy.play(np.asarray(obs, np.float32)[..., :self._n], self.noise)


def resolve_opponent(spec: str, league_dir: str | None = None, *, decision_ticks: int = 4,
                     reaction_frames: int = 0, timeout: float = 5.0) -> tuple[Any, str]:
    """(what the env plays in slot 1, the opponent's id in a match log) for ``spec``:

    * ``cpu:L`` — the server's CPU (``CpuLevel``);
    * ``baseline`` — the league's scripted baseline (``BaselinePolicy``), logged as
      ``baseline``;
    * ``member:ID`` — a league member of ``league_dir`` playing from its ``.bpw``
      (``FrozenOpponent``, as the league's frozen opponents play);
    * ``endpoint:URL`` — another ``/move`` endpoint (:class:`EndpointSeat`), logged as
      the member its ``GET /info`` names (else ``ValueError``: a match log needs an id);
    * a ``.bpw`` or ``.zip`` file — :class:`PolicyFileOpponent`, logged as the file's
      name without its extension (a league's ``artifacts/<id>.bpw`` is logged as
      ``<id>``), which must then be a valid member id.
    """
    from brawlkit.league.records import BASELINE_ID, id_problem

    if CpuLevel.is_spec(spec):
        return CpuLevel.parse(spec).spec, CpuLevel.parse(spec).spec
    if spec == BASELINE_ID:
        from brawlkit.league.opponents import BaselinePolicy

        return BaselinePolicy(), BASELINE_ID
    if spec.startswith(MEMBER_PREFIX):
        if league_dir is None:
            raise ValueError(f"{spec}: a member opponent needs --league-dir")
        from brawlkit.league.directory import LeagueDir
        from brawlkit.league.opponents import FrozenOpponent

        member = LeagueDir(league_dir, create=False).member(spec[len(MEMBER_PREFIX):])
        frozen = FrozenOpponent(member, league_dir, env_layout=INPUT_LAYOUT_WIDEST)
        frozen.period = int(frozen.policy.meta.action_repeat)  # type: ignore[attr-defined]
        return frozen, member.id
    if spec.startswith(ENDPOINT_PREFIX):
        url = spec[len(ENDPOINT_PREFIX):]
        info = MoveEndpoint(url, timeout=timeout).info()
        name = info.get("member")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{spec}: the endpoint's GET /info names no member to log it as")
        seat = EndpointSeat(url, decision_ticks=int(info.get("decision_ticks") or decision_ticks),
                            reaction_frames=reaction_frames, timeout=timeout)
        return seat, name
    if spec.endswith((".bpw", ".zip")):
        path = Path(spec)
        if not path.is_file():
            raise ValueError(f"{spec}: no such policy file")
        if why := id_problem(path.stem, "the file's name (its id in the match log)"):
            raise ValueError(f"{spec}: {why}")
        try:
            opp = PolicyFileOpponent(path)
        except (OSError, KeyError) as e:
            raise ValueError(f"{spec}: not a policy this player can load ({e})") from None
        return opp, opp.label
    raise ValueError(f"an opponent is {OPPONENT_FORMS}; got {spec!r}")


@dataclass(frozen=True)
class FightSpec:
    """One fight to play: the seed, the opponent (:func:`resolve_opponent`'s spec), its
    stratum for the baseline (default: the opponent), an optional endpoint other than
    the runner's, and a tick limit (tests)."""

    seed: int
    opponent: str = "cpu:1"
    stratum: str = ""
    endpoint: str | None = None
    max_ticks: int | None = None

    @property
    def difficulty(self) -> str:
        return self.stratum or self.opponent


@dataclass
class FightResult:
    """A played fight, or a void one (``void`` says why; ``steps`` then empty)."""

    spec: FightSpec
    outcome: str | None = None
    ticks: int = 0
    steps: list[MoveStep] = field(default_factory=list)
    void: str | None = None
    opponent_id: str = ""
    wall_s: float = 0.0
    worker_pid: int = 0
    server_pid: int = 0

    @property
    def ok(self) -> bool:
        return self.void is None and self.outcome is not None


@dataclass(frozen=True)
class WorkerConfig:
    """What every worker plays by (the runner's settings, sent once at start)."""

    endpoint: str
    decision_ticks: int = 8
    reaction_frames: int = 6
    call_timeout_s: float = 5.0
    fight_timeout_s: float = 300.0
    max_failed_streak: int = 5
    league_dir: str | None = None


def _play_one(cfg: WorkerConfig, env: MoveEnv, spec: FightSpec,
              endpoints: dict[str, MoveEndpoint]) -> FightResult:
    url = spec.endpoint or cfg.endpoint
    if url not in endpoints:
        endpoints[url] = MoveEndpoint(url, timeout=cfg.call_timeout_s)
    opponent, opp_id = resolve_opponent(spec.opponent, cfg.league_dir,
                                        decision_ticks=cfg.decision_ticks,
                                        reaction_frames=cfg.reaction_frames,
                                        timeout=cfg.call_timeout_s)
    t0 = time.monotonic()
    steps, snap = play_fight(endpoints[url], env, seed=spec.seed, decision_ticks=cfg.decision_ticks,
                             reaction_frames=cfg.reaction_frames, max_ticks=spec.max_ticks,
                             opponent=opponent, deadline=t0 + cfg.fight_timeout_s,
                             max_failed_streak=cfg.max_failed_streak)
    from brawlkit.env.rewards import match_outcome

    outcome = match_outcome(snap, 0)
    if outcome is None and spec.max_ticks is not None:  # cut by the tick limit: by standing
        me, op = snap.players
        outcome = "win" if (me.stocks, -me.damage) > (op.stocks, -op.damage) else (
            "loss" if (me.stocks, -me.damage) < (op.stocks, -op.damage) else "draw")
    return FightResult(spec, outcome, snap.tick, steps, opponent_id=opp_id,
                       wall_s=time.monotonic() - t0)


def _worker_loop(conn: Connection, cfg: WorkerConfig) -> None:
    """One worker: fights from the pipe until ``None``, one result back per fight."""
    from brawlkit.common.threads import limit_threads

    limit_threads()
    env: MoveEnv | None = None
    endpoints: dict[str, MoveEndpoint] = {}
    while (spec := conn.recv()) is not None:
        try:
            if env is None:  # blocking server (spin 0): the cores belong to the model
                env = MoveEnv(mode="lockstep", action_repeat=cfg.decision_ticks, opponent="cpu:1",
                              server_spin_us=0, recv_timeout=max(5.0, cfg.call_timeout_s + 1.0))
            res = _play_one(cfg, env, spec, endpoints)
        except FightVoid as e:
            res = FightResult(spec, void=f"fight: {e}")
        except EnvError as e:  # the server died or stopped answering: a new one next time
            res = FightResult(spec, void=f"server: {str(e).splitlines()[0][:200]}")
            if env is not None:
                env.close()
            env = None
        except Exception as e:  # noqa: BLE001 - one fight's bug must not end the batch
            res = FightResult(spec, void=f"error: {type(e).__name__}: {e} "
                                         f"{traceback.format_exc(limit=-2)[-300:]}")
        res.worker_pid = os.getpid()
        server = env.server if env is not None else None
        res.server_pid = server.proc.pid if server is not None and server.proc is not None else 0
        conn.send(res)
    if env is not None:
        env.close()


class _Worker:
    def __init__(self, ctx: Any, cfg: WorkerConfig) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_loop, args=(child, cfg), daemon=True)
        self.proc.start()
        child.close()
        self.job: int | None = None
        self.started = 0.0
        self.server_pid = 0

    def kill(self) -> None:
        if self.proc.is_alive() and self.proc.pid is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join(5)
        self.conn.close()


class RolloutRunner:
    """Plays batches of fights against ``cfg.endpoint`` with ``workers`` processes.

    ``progress`` shows a tqdm bar per batch.  :meth:`busy` tells which worker plays
    what (tests kill them through it); :attr:`voids` counts void fights by reason."""

    def __init__(self, cfg: WorkerConfig, workers: int = 2, grace_s: float = 10.0,
                 progress: bool = True) -> None:
        self.cfg, self.n, self.grace_s, self.progress = cfg, int(workers), grace_s, progress
        self._ctx = mp.get_context("spawn")  # no fork of a process with torch and threads
        self.workers = [_Worker(self._ctx, cfg) for _ in range(self.n)]
        self.voids: dict[str, int] = {}
        self.replaced = 0
        self._spent = 0.0

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the live workers and their game
        servers, plus the workers already replaced: what a run costs on a shared machine,
        where wall-clock time says more about the neighbours than about the run."""
        return self._spent + sum(_tree_cpu(w.proc.pid or 0) for w in self.workers)

    def busy(self) -> list[tuple[int, int | None, int]]:
        """(worker pid, index of the fight it plays or None, its server's pid or 0)."""
        return [(w.proc.pid or 0, w.job, w.server_pid) for w in self.workers]

    def _void(self, results: list[FightResult | None], i: int, spec: FightSpec, why: str) -> None:
        results[i] = FightResult(spec, void=why)
        kind = why.split(":", 1)[0]
        self.voids[kind] = self.voids.get(kind, 0) + 1

    def _replace(self, k: int) -> None:
        self._spent += _tree_cpu(self.workers[k].proc.pid or 0)
        self.workers[k].kill()
        self.workers[k] = _Worker(self._ctx, self.cfg)
        self.replaced += 1

    def run(self, specs: list[FightSpec], desc: str = "fights") -> list[FightResult]:
        """Play every spec; one result each, in order (void ones included)."""
        from tqdm.auto import tqdm

        results: list[FightResult | None] = [None] * len(specs)
        todo = list(range(len(specs)))[::-1]
        bar = tqdm(total=len(specs), desc=desc, disable=not self.progress, leave=False)
        try:
            while todo or any(w.job is not None for w in self.workers):
                for w in self.workers:
                    if w.job is None and todo:
                        w.job, w.started = todo.pop(), time.monotonic()
                        w.conn.send(specs[w.job])
                self._collect(specs, results, bar)
        finally:
            bar.close()
        out = [r for r in results if r is not None]
        assert len(out) == len(specs)
        return out

    def _collect(self, specs: list[FightSpec], results: list[FightResult | None], bar: Any) -> None:
        """Wait a little for results; void and replace dead or overdue workers."""
        conns = [w.conn for w in self.workers if w.job is not None]
        ready = wait(conns, timeout=0.25) if conns else []
        for k, w in enumerate(list(self.workers)):
            if w.job is None:
                continue
            i = w.job
            if w.conn in ready:
                try:
                    res: FightResult = w.conn.recv()
                except (EOFError, OSError):
                    self._void(results, i, specs[i], "worker: died during the fight")
                    self._replace(k)
                else:
                    w.server_pid = res.server_pid
                    results[i] = res
                    if res.void is not None:
                        kind = res.void.split(":", 1)[0]
                        self.voids[kind] = self.voids.get(kind, 0) + 1
                    w.job = None
                bar.update(1)
            elif not w.proc.is_alive():
                self._void(results, i, specs[i], "worker: died during the fight")
                self._replace(k)
                bar.update(1)
            elif time.monotonic() - w.started > self.cfg.fight_timeout_s + self.grace_s:
                self._void(results, i, specs[i], "hung: the worker outlived the fight's deadline")
                self._replace(k)
                bar.update(1)

    def close(self) -> None:
        for w in self.workers:
            try:
                if w.job is None and w.proc.is_alive():
                    w.conn.send(None)
                    w.proc.join(5)
            except (OSError, BrokenPipeError):
                pass
            w.kill()


def _tree_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its children (Linux ``/proc``; 0 if gone)."""
    if not pid:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(_tree_cpu(int(k)) for k in kids)


def spam_fraction(steps: list[MoveStep]) -> float:
    """The share of a fight's moves that are its most-played named move (the write-up's
    reward-hacking check: one spammed move over most of a fight)."""
    if not steps:
        return 0.0
    from collections import Counter

    return Counter(s.move for s in steps).most_common(1)[0][1] / len(steps)


__all__ = ["ENDPOINT_PREFIX", "MEMBER_PREFIX", "FightResult", "FightSpec", "RolloutRunner",
           "WorkerConfig", "resolve_opponent", "spam_fraction"]
