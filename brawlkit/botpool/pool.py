"""The bot pool engine: native bots playing each other and waiting for humans.

One ``select`` loop owns every child process (docs/botpool.md has the rules):

* ``pairs`` slots, each a bot-vs-bot match in an arena of ONE local server: the
  creator (``--new-arena``) prints the arena it made, its partner joins it
  (``--arena ID --no-reset``), and the creator's ``match N winner W ticks T`` line
  becomes a :class:`~brawlkit.league.records.MatchRecord` (source ``botpool``).
* ``human_bots`` seats: a bot waiting in its own arena of a second, realtime server
  for whoever sends HELLO ``arena_op`` ANY; its ``peer`` lines say who came.
* Failures make a match VOID (never a result): a bot dying, the server dying (it
  is restarted), a match that runs past its bound.  One log line each.

Bots are drawn by fewest games started in this run (ties at random, then the
least-played pairing): uniform random draws leave some checkpoints unplayed for a
long time when there are many of them, while this gives every bot — a checkpoint
registered a minute ago included — its next game within about ``bots / (2·pairs)``
rounds, so ratings move for all of them at the same pace.
"""

from __future__ import annotations

import json
import queue
import random
import re
import select
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from brawlkit.botpool.procs import BotProc, PeerLine, Result, bot_features
from brawlkit.botpool.sources import ANONYMOUS, INITIAL, K_FACTOR, Bot, Snapshot, gather
from brawlkit.common.paths import native_path
from brawlkit.league.directory import LeagueDir, MatchWriter
from brawlkit.league.ratings import elo_expected
from brawlkit.league.records import MatchRecord
from brawlkit.wire.constants import C
from brawlkit.wire.server_process import ServerError, ServerProcess

SOURCE = "botpool"
#: a bot that has not printed its arena this long after its start has failed
JOIN_TIMEOUT_S = 15.0
#: how long the creator's result may lag behind its partner's clean exit
RESULT_GRACE_S = 5.0
#: a bot that failed to start this often in a row is left out for the rest of the run
MAX_START_FAILURES = 3
#: a client silent this long loses its slot: a SIGKILLed bot never says BYE
POOL_CLIENT_TIMEOUT_S = 10.0
HUMAN_CLIENT_TIMEOUT_S = 15.0
#: player names (spec section 3)
PLAYER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,24}$")


def hang_bound(mode: str, speed: float) -> float:
    """Seconds after both bots joined within which a match must report its result:
    three times the match's nominal length at this pace plus 30 s of slack (1.5× for
    realtime, whose pace is exact); unpaced fastforward (speed 0) has no nominal
    length, so a fixed 120 s (a full match takes well under 10 s there)."""
    ticks, hz = C.BP_MATCH_TICKS, C.BP_TICK_HZ
    if mode == "realtime":
        return ticks / hz * 1.5 + 30.0
    if speed > 0:
        return ticks / (hz * speed) * 3.0 + 30.0
    return 120.0


def wire_name(member_id: str, limit: int = C.BP_NAME_LEN - 1) -> str:
    """``member_id`` as a name the wire carries (IDENT: at most ``BP_NAME_LEN`` - 1
    characters). Training ids are longer (``league_exploiter-<run>-g0041`` is 41), and a
    bot refuses a longer ``--name``; the pool knows which bot it started, so the name is
    only for people: keep the role's start and the generation's end, ``~`` between."""
    if len(member_id) <= limit:
        return member_id
    tail = min(limit // 2, len(member_id))
    return member_id[:limit - tail - 1] + "~" + member_id[-tail:]


@dataclass
class Options:
    league_dir: Path | None = None
    registry: str | None = None
    pairs: int = 2
    human_bots: int = 0
    human_port: int = 0
    human_host: str = "127.0.0.1"
    mode: str = "fastforward"
    speed: float = 1.0
    matches: int = 0
    refresh: float = 60.0
    replays: Path | None = None
    keep_upsets: int = 20
    seed: int | None = None
    live: bool = True
    hang_timeout: float = 0.0


@dataclass
class Pair:
    slot: int
    a: Bot
    b: Bot
    seed: int
    rating_a: float
    rating_b: float
    server_gen: int
    proc_a: BotProc
    proc_b: BotProc | None = None
    started: float = field(default_factory=time.monotonic)


@dataclass
class Seat:
    """A bot waiting on the human server (and then playing whoever joined)."""

    bot: Bot
    rating: float
    server_gen: int
    proc: BotProc
    since: float = field(default_factory=time.monotonic)
    opponent: PeerLine | None = None     # the last client seen in the other slot
    engaged_at: float | None = None
    left_at: float | None = None         # when the other slot emptied again


class BotPool:
    def __init__(self, opts: Options, league: LeagueDir | None, client: Any | None) -> None:
        self.o = opts
        self.league, self.client = league, client
        self.rng = random.Random(opts.seed)
        self.bot_bin = native_path("brawlpit_bot")
        self.bot_opts = bot_features(self.bot_bin)
        self.server_opts = bot_features(native_path("brawlpit_server"))
        self.messages: queue.Queue[str] = queue.Queue()
        self.writer: MatchWriter | None = league.writer(SOURCE) if league is not None else None
        self.poster: Any = None
        if client is not None:
            from brawlkit.botpool.poster import Poster

            self.poster = Poster(client, self.messages)
        self.keeper: Any = None
        if opts.replays is not None:
            if "--record" in self.server_opts:
                from brawlkit.botpool.replays import ReplayKeeper

                self.keeper = ReplayKeeper(opts.replays, opts.keep_upsets)
            else:
                self.messages.put("replays: this brawlpit_server has no --record option; "
                                  "no replays are kept")
        self.hang_s = opts.hang_timeout or hang_bound(opts.mode, opts.speed)
        self.human_hang_s = opts.hang_timeout or hang_bound("realtime", 1.0)
        # state
        self.bots: dict[str, Bot] = {}
        self.ratings: dict[str, float] = {}
        self.excluded: dict[str, str] = {}
        self.start_failures: Counter[str] = Counter()
        self.starts: Counter[str] = Counter()
        self.human_starts: Counter[str] = Counter()
        self.pair_counts: Counter[frozenset[str]] = Counter()
        self.wdl: dict[str, list[int]] = {}
        self.pairs: dict[int, Pair] = {}
        self.seats: list[Seat] = []
        self.reaping: list[tuple[BotProc, float]] = []
        self.completed = 0
        self.human_completed = 0
        self.voids = 0
        self.void_reasons: Counter[str] = Counter()
        self.server_restarts = 0
        self.abandoned = 0
        self._last_time = 0.0
        self._stop = False
        self._signals = 0
        self._fresh: Snapshot | None = None
        self._fresh_lock = threading.Lock()
        self._warned_few = False
        self.server: ServerProcess | None = None
        self.human: ServerProcess | None = None
        self.human_port = opts.human_port
        self._human_retry_at = 0.0
        self.gen = 0
        self.human_gen = 0
        self.incoming: dict[tuple[str, int], Path] = {}
        self.t0 = time.monotonic()
        self._live: Any = None

    # ------------------------------------------------------------------ output
    def say(self, line: str) -> None:
        """One log line: printed (``--no-live``), or scrolled above the live table."""
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
        else:
            print(line, flush=True)

    def _drain_messages(self) -> None:
        while True:
            try:
                self.say(self.messages.get_nowait())
            except queue.Empty:
                return

    # ------------------------------------------------------------------ servers
    def _server_args(self, kind: str, gen: int) -> list[str]:
        if self.keeper is None:
            return []
        d = self.keeper.incoming(f"{kind}-{gen}")
        self.incoming[(kind, gen)] = d
        return ["--record", str(d)]

    def _start_pool_server(self) -> None:
        self.gen += 1
        self.server = ServerProcess(
            mode=self.o.mode, speed=self.o.speed if self.o.mode == "fastforward" else None,
            client_timeout=POOL_CLIENT_TIMEOUT_S, max_arenas=max(64, 2 * self.o.pairs + 8),
            extra_args=self._server_args("pool", self.gen)).wait_ready()

    def _start_human_server(self, port: int) -> None:
        self.human_gen += 1
        self.human = ServerProcess(
            mode="realtime", host=self.o.human_host, port=port,
            client_timeout=HUMAN_CLIENT_TIMEOUT_S, max_arenas=max(64, 2 * self.o.human_bots + 8),
            extra_args=self._server_args("human", self.human_gen)).wait_ready()
        self.human_port = self.human.port

    def _check_servers(self) -> None:
        if self.server is not None and self.o.pairs and not self.server.alive():
            code = self.server.proc.poll() if self.server.proc else None
            doomed = [p for p in self.pairs.values() if p.server_gen == self.gen]
            self.say(f"server died (exit code {code}); restarting it, {len(doomed)} match(es) "
                     "in flight void")
            for p in doomed:
                self._void(p, "server died")
            self.server.close()
            self.server.remove_log()
            self.server = None
        if self.server is None and self.o.pairs and not self._stop:
            try:
                self._start_pool_server()
                if self.gen > 1 and self.server is not None:
                    self.server_restarts += 1
                    self.say(f"server restarted on port {self.server.port}")
            except ServerError as e:
                self.say(f"server restart failed: {e}")
                time.sleep(1.0)
        if self.human is not None and not self.human.alive():
            code = self.human.proc.poll() if self.human.proc else None
            port = self.human.port
            engaged = [s for s in self.seats if s.engaged_at is not None]
            self.say(f"human server died (exit code {code}); restarting it on port {port}, "
                     f"{len(engaged)} human match(es) void")
            for s in list(self.seats):
                if s.engaged_at is not None:
                    self._void_seat(s, "human server died")
                else:
                    self._drop_seat(s)
            self.human.close()
            self.human.remove_log()
            self.human = None
        if self.human is None and self.o.human_bots and self.human_gen \
                and time.monotonic() >= self._human_retry_at:
            # the same port first (humans know it); if it was taken meanwhile, any port
            for port in (self.human_port, 0):
                try:
                    self._start_human_server(port)
                except ServerError as e:
                    self.say(f"human server restart on port {port} failed: {e}")
                    continue
                self.server_restarts += 1
                self.say(f"human server listening {self.human_port}")
                break
            else:
                self._human_retry_at = time.monotonic() + 2.0

    # ------------------------------------------------------------------ bots
    def _take_refresh(self, snap: Snapshot | None = None) -> None:
        if snap is None:
            with self._fresh_lock:
                snap, self._fresh = self._fresh, None
        if snap is None:
            return
        new = {k: v for k, v in snap.bots.items() if k not in self.excluded}
        joined = sorted(set(new) - set(self.bots))
        left = sorted(set(self.bots) - set(new))
        if joined or left:
            parts = []
            if joined:
                parts.append(f"{len(joined)} joined ({', '.join(joined[:5])}"
                             f"{', ...' if len(joined) > 5 else ''})")
            if left:
                parts.append(f"{len(left)} left ({', '.join(left[:5])}"
                             f"{', ...' if len(left) > 5 else ''})")
            self.say(f"bots: {'; '.join(parts)}; {len(new)} in the pool")
        for line in snap.problems:
            self.say(f"bot left out: {line}")
        self.bots = new
        self.ratings.update(snap.ratings)

    def _refresher(self) -> None:
        while not self._stop:
            deadline = time.monotonic() + self.o.refresh
            while time.monotonic() < deadline and not self._stop:
                time.sleep(0.2)
            if self._stop:
                return
            try:
                snap = gather(self.league, self.client)
            except Exception as e:  # noqa: BLE001 - a failed refresh keeps the old set
                self.messages.put(f"refresh failed, keeping the previous bots: {e}")
                continue
            with self._fresh_lock:
                self._fresh = snap

    def rating(self, bot_id: str) -> float:
        return self.ratings.get(bot_id, INITIAL)

    def _spawn(self, server: ServerProcess, bot: Bot, args: list[str], name: str,
               label: str) -> BotProc:
        extra = list(args)
        if "--name" in self.bot_opts:
            extra += ["--name", wire_name(name)]
        return BotProc(self.bot_bin, server.address, bot.blob, extra, label)

    def _pick(self, candidates: list[str], load: Counter[str], partner: str | None) -> str:
        def key(b: str) -> tuple[int, int]:
            return (load[b], self.pair_counts[frozenset((b, partner))] if partner else 0)

        best = min(key(b) for b in candidates)
        return self.rng.choice(sorted(b for b in candidates if key(b) == best))

    def _fill_pairs(self) -> None:
        if self._stop or self.server is None:
            return
        ids = sorted(self.bots)
        if len(ids) < 2:
            if not self._warned_few and self.o.pairs:
                self.say(f"waiting for bots: {len(ids)} with a blob, a pair needs 2")
                self._warned_few = True
            return
        self._warned_few = False
        for slot in range(self.o.pairs):
            if slot in self.pairs:
                continue
            if self.o.matches and self.completed + len(self.pairs) >= self.o.matches:
                return
            a = self._pick(ids, self.starts, None)
            b = self._pick([i for i in ids if i != a], self.starts, a)
            if self.rng.random() < 0.5:
                a, b = b, a
            seed = self.rng.randrange(1, 2**31)
            args = ["--new-arena", "--matches", "1", "--seed", str(seed)]
            if "--mode" in self.bot_opts:
                args += ["--mode", self.o.mode]
            try:
                proc = self._spawn(self.server, self.bots[a], args, a, f"{a} (creator)")
            except OSError as e:
                self.say(f"pair {slot}: cannot start brawlpit_bot: {e}")
                return
            self.starts[a] += 1
            self.starts[b] += 1
            self.pair_counts[frozenset((a, b))] += 1
            self.pairs[slot] = Pair(slot, self.bots[a], self.bots[b], seed, self.rating(a),
                                    self.rating(b), self.gen, proc)

    def _start_failed(self, bot: Bot, proc: BotProc) -> None:
        """A bot that exits before it joined an arena (weights refused, ...)."""
        self.start_failures[bot.id] += 1
        if self.start_failures[bot.id] >= MAX_START_FAILURES and bot.id not in self.excluded:
            self.excluded[bot.id] = proc.exit_reason()
            self.bots.pop(bot.id, None)
            self.say(f"bot {bot.id} left out for this run: {MAX_START_FAILURES} failed starts, "
                     f"last: {proc.exit_reason()}")

    def _advance_pair(self, p: Pair) -> None:
        a, b = p.proc_a, p.proc_b
        now = time.monotonic()
        a_rc = a.poll()  # poll first: it also reads the last lines of a bot that exited
        b_rc = b.poll() if b is not None else None
        if a.results:
            if b is not None and b_rc not in (None, 0) and not b.results:
                self._void(p, f"{p.b.id} (pid {b.pid}) {b.exit_reason()} before the result")
                return
            self._record_pair(p, a.results[0])
            return
        if a_rc is not None:
            if a.arena is None:
                self._start_failed(p.a, a)
            self._void(p, f"{p.a.id} (pid {a.pid}) {a.exit_reason()}")
            return
        if b is not None and b_rc is not None:
            if b_rc == 0 and b.results and b.exited_at is not None \
                    and now - b.exited_at < RESULT_GRACE_S:
                return  # the joiner saw the end first; the creator's line is on its way
            if b.arena is None:
                self._start_failed(p.b, b)
            self._void(p, f"{p.b.id} (pid {b.pid}) {b.exit_reason()}")
            return
        if b is None:
            if a.arena is not None and self.server is not None:
                args = ["--arena", str(a.arena), "--no-reset", "--matches", "1"]
                try:
                    p.proc_b = self._spawn(self.server, p.b, args, p.b.id, f"{p.b.id} (joiner)")
                except OSError as e:
                    self._void(p, f"cannot start brawlpit_bot for {p.b.id}: {e}")
                    return
                self.say(f"pair {p.slot}: {p.a.id} (pid {a.pid}) vs {p.b.id} "
                         f"(pid {p.proc_b.pid}) arena {a.arena} seed {p.seed}")
            elif now - a.started > JOIN_TIMEOUT_S:
                self._void(p, f"{p.a.id} (pid {a.pid}) made no arena within {JOIN_TIMEOUT_S:g} s")
            return
        if b.joined_at is None:
            if now - b.started > JOIN_TIMEOUT_S:
                self._void(p, f"{p.b.id} (pid {b.pid}) did not join arena {a.arena} within "
                           f"{JOIN_TIMEOUT_S:g} s")
        elif now - b.joined_at > self.hang_s:
            self._void(p, f"hung: no result within {self.hang_s:.0f} s")

    def _outcome(self, slot: int | None, r: Result) -> str | None:
        """The result from the side of the bot in ``slot``; None when the match has none."""
        if r.winner == C.BP_WINNER_DRAW:
            return "draw"
        if r.winner not in (0, 1) or slot is None:
            return None
        return "win" if r.winner == slot else "loss"

    def _now(self) -> float:
        """Match time: epoch seconds, strictly increasing in this process (a match is its
        content; two matches of one pair finishing in one tick must stay two)."""
        t = max(time.time(), self._last_time + 1e-6)
        self._last_time = t
        return t

    def _apply(self, rec: MatchRecord) -> None:
        """This run's W/D/L and the local Elo update until the next refresh replays the log."""
        for side, res in ((rec.a, rec.result), (rec.b, {"win": "loss", "loss": "win"}.get(
                rec.result, rec.result))):
            row = self.wdl.setdefault(side, [0, 0, 0])
            row[{"win": 0, "draw": 1, "loss": 2}[res]] += 1
        ra, rb = self.rating(rec.a), self.rating(rec.b)
        e = elo_expected(ra, rb)
        delta = K_FACTOR * (rec.score - e)
        if rec.a != ANONYMOUS:
            self.ratings[rec.a] = ra + delta
        if rec.b != ANONYMOUS:
            self.ratings[rec.b] = rb - delta

    def _store(self, rec: MatchRecord, ticket: str | None = None) -> None:
        if self.writer is not None:
            self.writer.write(rec)
        if self.poster is not None:
            self.poster.put(rec, ticket)

    def _record_pair(self, p: Pair, r: Result) -> None:
        res = self._outcome(p.proc_a.slot, r)
        if res is None:
            self._void(p, f"result line without a winner ({r})")
            return
        rec = MatchRecord(time=self._now(), a=p.a.id, b=p.b.id, result=res, ticks=r.ticks,
                          source=SOURCE)
        self._store(rec)
        self._apply(rec)
        self.completed += 1
        verb = {"win": "beats", "loss": "loses to", "draw": "draws with"}[res]
        self.say(f"match {self.completed}: {p.a.id} {verb} {p.b.id} ({r.ticks} ticks; elo before "
                 f"{p.rating_a:.0f} vs {p.rating_b:.0f}) [pair {p.slot}, arena {p.proc_a.arena}]")
        if self.keeper is not None and p.proc_a.arena is not None:
            inc = self.incoming.get(("pool", p.server_gen))
            if inc is not None:
                self.keeper.expect(inc, p.proc_a.arena, r.match_id, rec, p.rating_a, p.rating_b)
        self._retire(p, grace=3.0)
        self.start_failures[p.a.id] = self.start_failures[p.b.id] = 0

    def _retire(self, p: Pair, grace: float) -> None:
        self.pairs.pop(p.slot, None)
        for proc in (p.proc_a, p.proc_b):
            if proc is not None:
                self._reap_later(proc, grace)

    def _reap_later(self, proc: BotProc, grace: float) -> None:
        if grace <= 0 and proc.poll() is None:
            try:
                proc.proc.terminate()
            except ProcessLookupError:
                pass
        self.reaping.append((proc, time.monotonic() + max(grace, 1.0)))

    def _reap(self) -> None:
        keep = []
        now = time.monotonic()
        for proc, deadline in self.reaping:
            if proc.poll() is not None:
                proc.close()
                continue
            if now > deadline:
                proc.proc.kill() if now > deadline + 2 else proc.proc.terminate()
            keep.append((proc, deadline))
        self.reaping = keep

    def _void(self, p: Pair, reason: str) -> None:
        self.voids += 1
        self.void_reasons[reason.split(":")[0] if reason.startswith("hung") else
                          re.sub(r"^\S+ \(pid \d+\) ", "", reason).split(" (")[0]] += 1
        self.say(f"VOID pair {p.slot}: {p.a.id} vs {p.b.id}: {reason}")
        self._retire(p, grace=0.0)

    # ------------------------------------------------------------------ humans
    def _seat_name(self, bot: Bot) -> str:
        """``<id> (<elo>)``, cut to BP_NAME_LEN - 1 characters (the id is shortened)."""
        suffix = f" ({self.rating(bot.id):.0f})"
        return wire_name(bot.id, C.BP_NAME_LEN - 1 - len(suffix)) + suffix

    def _fill_seats(self) -> None:
        if self._stop or self.human is None:
            return
        ids = sorted(self.bots)
        while ids and len(self.seats) < self.o.human_bots:
            bid = self._pick(ids, self.human_starts, None)
            bot = self.bots[bid]
            args = ["--new-arena", "--matches", "1", "--seed", str(self.rng.randrange(1, 2**31))]
            if "--mode" in self.bot_opts:
                args += ["--mode", "realtime"]
            try:
                proc = self._spawn(self.human, bot, args, self._seat_name(bot), f"{bid} (seat)")
            except OSError as e:
                self.say(f"human seat: cannot start brawlpit_bot: {e}")
                return
            self.human_starts[bid] += 1
            self.seats.append(Seat(bot, self.rating(bid), self.human_gen, proc))

    def _advance_seat(self, s: Seat) -> None:
        proc = s.proc
        if proc.slot is not None:
            other = proc.peers.get(1 - proc.slot)
            if other is not None and other.kind == C.BP_PEER_CLIENT:
                if s.engaged_at is None:
                    s.engaged_at = time.monotonic()
                    self.say(f"a human joined {s.bot.id} (arena {proc.arena})" if not other.name
                             else f"human {other.name!r} joined {s.bot.id} (arena {proc.arena})")
                elif other.name and (s.opponent is None or s.opponent.name != other.name):
                    self.say(f"the human in arena {proc.arena} is {other.name!r}"
                             f"{' (with a ticket)' if other.ticket else ''}")
                s.opponent = other
            elif other is not None and other.kind == C.BP_PEER_EMPTY and s.engaged_at is not None:
                # the human left; a result line may still be on its way (they quit just as
                # the match ended): void only when none follows
                s.left_at = s.left_at or time.monotonic()
        if s.left_at is not None and not proc.results \
                and time.monotonic() - s.left_at > RESULT_GRACE_S / 5:
            self._void_seat(s, "the human left mid-match")
            return
        if proc.results:
            self._record_seat(s, proc.results[0])
            return
        if proc.poll() is not None:
            if proc.arena is None:
                self._start_failed(s.bot, proc)
            if s.engaged_at is not None:
                self._void_seat(s, f"{s.bot.id} (pid {proc.pid}) {proc.exit_reason()}")
            else:
                self.say(f"waiting bot {s.bot.id} (pid {proc.pid}) {proc.exit_reason()}; "
                         "a fresh one takes its seat")
                self._drop_seat(s)
            return
        if proc.arena is None and time.monotonic() - proc.started > JOIN_TIMEOUT_S:
            self.say(f"waiting bot {s.bot.id} (pid {proc.pid}) made no arena; replaced")
            self._drop_seat(s)
        elif s.engaged_at is not None and time.monotonic() - s.engaged_at > self.human_hang_s:
            self._void_seat(s, f"hung: no result within {self.human_hang_s:.0f} s")

    def _drop_seat(self, s: Seat) -> None:
        if s in self.seats:
            self.seats.remove(s)
        self._reap_later(s.proc, 0.0)

    def _void_seat(self, s: Seat, reason: str) -> None:
        self.voids += 1
        self.void_reasons["human: " + reason.split(" (")[0]] += 1
        who = s.opponent.name if s.opponent and s.opponent.name else "a human"
        self.say(f"VOID human match: {s.bot.id} vs {who}: {reason}")
        self._drop_seat(s)

    @staticmethod
    def opponent_id(peer: PeerLine | None) -> tuple[str, str | None, str]:
        """(member id, ticket, note) of the human a seat played."""
        if peer is None:
            return ANONYMOUS, None, "no identity seen"
        if peer.kind == C.BP_PEER_CPU and peer.name:
            return peer.name, None, "the server's CPU"
        if peer.ticket and PLAYER_NAME.match(peer.name):
            return f"player:{peer.name}", peer.ticket, "ticket attached"
        why = "no ticket" if not peer.ticket else "name not a player name"
        return ANONYMOUS, None, f"name {peer.name!r}, {why}"

    def _record_seat(self, s: Seat, r: Result) -> None:
        res = self._outcome(s.proc.slot, r)
        if res is None:
            self._void_seat(s, f"result line without a winner ({r})")
            return
        opp, ticket, note = self.opponent_id(s.opponent)
        rec = MatchRecord(time=self._now(), a=s.bot.id, b=opp, result=res, ticks=r.ticks,
                          source=SOURCE)
        r_opp = self.rating(opp) if opp != ANONYMOUS else INITIAL
        self._store(rec, ticket)
        self._apply(rec)
        self.completed += 1
        self.human_completed += 1
        verb = {"win": "beats", "loss": "loses to", "draw": "draws with"}[res]
        tail = "; anonymous: only the bot's rating moves" if opp == ANONYMOUS else ""
        self.say(f"human match {self.completed}: {s.bot.id} {verb} {opp} ({r.ticks} ticks; "
                 f"{note}){tail}")
        if self.keeper is not None and s.proc.arena is not None:
            inc = self.incoming.get(("human", s.server_gen))
            if inc is not None:
                self.keeper.expect(inc, s.proc.arena, r.match_id, rec, s.rating, r_opp)
        self.seats.remove(s)
        self._reap_later(s.proc, 3.0)

    # ------------------------------------------------------------------ loop
    def procs(self) -> list[BotProc]:
        out = [p for pair in self.pairs.values() for p in (pair.proc_a, pair.proc_b) if p]
        return out + [s.proc for s in self.seats] + [p for p, _ in self.reaping]

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        self._stop = True
        if self._signals >= 3:  # the third Ctrl-C: give up on a clean stop
            raise KeyboardInterrupt

    def step(self, timeout: float = 0.1) -> None:
        procs = self.procs()
        fds = [fd for p in procs for fd in p.fds()]
        if fds:
            try:
                select.select(fds, [], [], timeout)
            except (InterruptedError, ValueError, OSError):
                pass
        else:
            time.sleep(timeout)
        for p in procs:
            p.pump()
        self._drain_messages()
        if self._stop:  # Ctrl-C in a terminal also reached the server: that is no failure
            return
        self._take_refresh()
        self._check_servers()
        for pair in list(self.pairs.values()):
            self._advance_pair(pair)
        for seat in list(self.seats):
            self._advance_seat(seat)
        self._reap()
        self._fill_pairs()
        self._fill_seats()
        if self.keeper is not None:
            for line in self.keeper.poll():
                self.say(line)

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        self._drain_messages()
        try:
            self._take_refresh(gather(self.league, self.client))
        except Exception as e:  # noqa: BLE001 - e.g. the registry is down: retried at each refresh
            self.say(f"no bots yet, retried every {self.o.refresh:g} s: {e}")
        try:
            if self.o.pairs:
                self._start_pool_server()
                assert self.server is not None
                print(f"pool server listening {self.server.port} ({self.o.mode}"
                      f"{f', speed {self.o.speed:g}' if self.o.mode == 'fastforward' else ''})",
                      flush=True)
            if self.o.human_bots:
                self._start_human_server(self.o.human_port)
                assert self.human is not None
                # announced once its bots wait in their arenas: a human arriving earlier
                # would find no arena and create one of their own (HELLO ANY)
                deadline = time.monotonic() + JOIN_TIMEOUT_S
                while time.monotonic() < deadline and not self._stop and self.bots and (
                        len(self.seats) < self.o.human_bots
                        or any(s.proc.arena is None for s in self.seats)):
                    self.step(0.05)
                print(f"human server listening {self.human.port}", flush=True)
        except ServerError as e:
            print(f"botpool: {e}", flush=True)
            self._shutdown()
            return 1
        refresher = threading.Thread(target=self._refresher, name="botpool-refresh", daemon=True)
        refresher.start()
        try:
            if self.o.live:
                self._run_live()
            else:
                self._loop()
        finally:
            self._stop = True
            self._shutdown()
        return 0

    def _loop(self) -> None:
        while not self._stop:
            self.step()
            if self.o.matches and self.completed >= self.o.matches:
                break

    def _run_live(self) -> None:
        from rich.live import Live

        from brawlkit.botpool.status import render

        with Live(render(self), refresh_per_second=2, transient=False) as live:
            self._live = live
            last = 0.0
            try:
                while not self._stop:
                    self.step()
                    if time.monotonic() - last > 0.5:
                        live.update(render(self))
                        last = time.monotonic()
                    if self.o.matches and self.completed >= self.o.matches:
                        break
                live.update(render(self))
            finally:
                self._live = None
        print(flush=True)  # the summary starts on a line of its own, under the table

    def _shutdown(self) -> None:
        in_flight = self.procs()
        self.abandoned = len(self.pairs) + sum(1 for s in self.seats if s.engaged_at)
        for p in in_flight:
            if p.poll() is None:
                try:
                    p.proc.terminate()
                except ProcessLookupError:
                    pass
        for p in in_flight:
            p.stop(grace=2.0)
        self.pairs.clear()
        self.seats.clear()
        self.reaping.clear()
        for srv in (self.server, self.human):
            if srv is not None:
                srv.close()
                srv.remove_log()
        if self.writer is not None:
            self.writer.close()
        unposted: list[tuple[MatchRecord, str | None]] = []
        if self.poster is not None:
            unposted = self.poster.close()
        if self.keeper is not None:
            for line in self.keeper.close():
                self.say(line)
        self._drain_messages()
        if unposted:
            path = Path(tempfile.gettempdir()) / f"botpool-unposted-{int(time.time())}.jsonl"
            path.write_text("".join(json.dumps({**r.to_json(), "ticket": t}) + "\n"
                                    for r, t in unposted))
            self.say(f"{len(unposted)} result(s) could not be posted to the registry; "
                     f"saved to {path}")
        print(self.summary(), flush=True)

    def summary(self) -> str:
        mins = (time.monotonic() - self.t0) / 60
        parts = [f"summary: {self.completed} match(es) ({self.human_completed} with humans)",
                 f"{self.voids} void", f"{self.server_restarts} server restart(s)",
                 f"{self.abandoned} stopped in flight", f"{len(self.bots)} bots",
                 f"{mins:.1f} min"]
        if self.poster is not None:
            parts.append(f"{self.poster.posted} posted to the registry")
        if self.keeper is not None:
            parts.append(f"{len(self.keeper.entries)} replay(s) kept")
        line = ", ".join(parts)
        if self.void_reasons:
            line += "\nvoid: " + "; ".join(f"{k} x{v}" for k, v in self.void_reasons.most_common())
        return line
