"""Bots waiting for humans: ``--human-bots`` seats on the realtime human server.

A seat is one bot in an arena of its own, waiting for whoever sends HELLO
``arena_op`` ANY.  The bot's ``peer`` lines say who holds the other slot: the moment a
client appears the seat is *engaged*; its IDENT name and ticket say who it is
(:func:`opponent_id`).  The result is recorded against ``player:NAME`` only with a
ticket (the registry checks it), else against ``anonymous`` — the human played, only
their identity is unproven, so only the bot's rating moves.

A waiting bot that dies or makes no arena is simply replaced (nobody was playing); a
human who leaves mid-match, a bot that dies while engaged, a match past its bound or
the server dying make the human match VOID.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from brawlkit.botpool.options import JOIN_TIMEOUT_S, RESULT_GRACE_S
from brawlkit.botpool.pairing import fewest_started
from brawlkit.botpool.part import PoolPart
from brawlkit.botpool.procs import BotProc, PeerLine, Result
from brawlkit.botpool.recording import VERBS, outcome, seat_void_kind
from brawlkit.botpool.servers import Death, wire_name
from brawlkit.botpool.sources import INITIAL, Bot
from brawlkit.league.records import ANONYMOUS_ID, player_id, player_name_problem
from brawlkit.wire.constants import C


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
    announced: bool = False              # "seat: ID waits in arena N" was said
    peers_read: int = 0                  # how much of proc.peer_history was looked at


def opponent_id(peer: PeerLine | None) -> tuple[str, str | None, str]:
    """(member id, ticket, note) of the human a seat played."""
    if peer is None:
        return ANONYMOUS_ID, None, "no identity seen"
    if peer.kind == C.BP_PEER_CPU and peer.name:
        return peer.name, None, "the server's CPU"
    # the league's rule of a player name (a reserved one such as "anonymous" is none)
    if peer.ticket and not player_name_problem(peer.name):
        return player_id(peer.name), peer.ticket, "ticket attached"
    why = "no ticket" if not peer.ticket else "name not a player name"
    return ANONYMOUS_ID, None, f"name {peer.name!r}, {why}"


class Seats(PoolPart):
    def setup(self) -> None:
        self.hang_s = self.o.seat_hang_s()
        self.seats: list[Seat] = []
        self.human_starts: Counter[str] = Counter()   # seats taken, per bot
        #: the registry's active checkpoint (set by the loop from ActiveWatch): with
        #: ``--seat-bots active`` every seat plays it
        self.active: Bot | None = None

    def procs(self) -> list[BotProc]:
        return [s.proc for s in self.seats]

    def engaged(self) -> int:
        """Seats with a human in the other slot (a match in flight)."""
        return sum(1 for s in self.seats if s.engaged_at)

    def ready(self) -> bool:
        """Every seat taken and its bot waiting in its arena: a human arriving now finds
        one (earlier, HELLO ANY would create an arena of its own and wait alone)."""
        return len(self.seats) >= self.o.human_bots and all(
            s.proc.arena is not None for s in self.seats)

    # ------------------------------------------------------------------ new seats
    def _seat_name(self, bot: Bot) -> str:
        """``<id> (<elo>)``, cut to BP_NAME_LEN - 1 characters (the id is shortened)."""
        suffix = f" ({self.roster.rating(bot.id):.0f})"
        return wire_name(bot.id, C.BP_NAME_LEN - 1 - len(suffix)) + suffix

    def seat_bot(self) -> Bot | None:
        """The bot the next seat plays: the active checkpoint (``--seat-bots active``,
        when one is set and has not been left out for failing to start), else the one
        with the fewest human games."""
        a = self.active
        if self.o.seat_bots == "active" and a is not None and a.id not in self.roster.excluded:
            return self.roster.bots.get(a.id, a)  # a league's own copy of the id wins
        ids = sorted(self.roster.bots)
        if not ids:
            return None
        return self.roster.bots[fewest_started(self.rng, ids, self.human_starts)]

    def active_changed(self, previous: str | None) -> None:
        """A new active checkpoint (or none since ``previous``): seats still waiting for
        a human (none has joined) get a bot of the new one at once, so the next human
        plays it; with none active any more, the seats that waited with ``previous`` are
        redrawn from every bot.  A match in flight is played out."""
        new = self.active.id if self.active is not None else None
        for s in list(self.seats):
            if s.engaged_at is not None:
                continue
            if (new is not None and s.bot.id != new) or (new is None and s.bot.id == previous):
                self.say(f"seat: {s.bot.id} replaced (the active checkpoint is now "
                         f"{new or 'none'})")
                self._drop(s)

    def fill(self) -> None:
        """A waiting bot in every free seat."""
        if self.server.proc is None:
            return
        while len(self.seats) < self.o.human_bots:
            bot = self.seat_bot()
            if bot is None:
                return
            bid = bot.id
            args = ["--new-arena", "--matches", "1", "--seed", str(self.rng.randrange(1, 2**31)),
                    *self.bot_procs.mode_args("realtime")]
            try:
                proc = self.bot_procs.spawn(self.server.proc, bot, args, self._seat_name(bot),
                                       f"{bid} (seat)")
            except OSError as e:
                self.say(f"human seat: cannot start brawlpit_bot: {e}")
                return
            self.human_starts[bid] += 1
            self.seats.append(Seat(bot, self.roster.rating(bid), self.server.gen, proc))

    # ------------------------------------------------------------------ in flight
    def advance(self, s: Seat) -> None:
        """One look at a seat: who is in the other slot, a result, or a failure."""
        proc = s.proc
        if proc.arena is not None and not s.announced:
            # the moment a human's HELLO finds this bot (before, it would make an arena
            # of its own): what an operator, or a test, waits for instead of guessing
            s.announced = True
            self.say(f"seat: {s.bot.id} waits in arena {proc.arena}")
        self._watch_peer(s)
        if s.left_at is not None and not proc.results \
                and time.monotonic() - s.left_at > RESULT_GRACE_S / 5:
            self._void(s, "the human left mid-match")
            return
        if proc.results:
            self._record(s, proc.results[0])
            return
        if proc.poll() is not None:
            self._exited(s)
            return
        if proc.arena is None and time.monotonic() - proc.started > JOIN_TIMEOUT_S:
            self.say(f"waiting bot {s.bot.id} (pid {proc.pid}) made no arena; replaced")
            self._drop(s)
        elif s.engaged_at is not None and time.monotonic() - s.engaged_at > self.hang_s:
            self._void(s, f"hung: no result within {self.hang_s:.0f} s")

    def _watch_peer(self, s: Seat) -> None:
        """Follow the other slot, every peer line in order: a human arriving engages the
        seat, their IDENT names them, an empty slot after that means they left.  (Only
        the newest line per look missed a human who came and went between two looks, as
        on a busy machine: the seat then waited on as if nobody had come.)"""
        proc = s.proc
        if proc.slot is None:
            return
        new, s.peers_read = proc.peer_history[s.peers_read:], len(proc.peer_history)
        for other in new:
            if other.slot == 1 - proc.slot:
                self._other_slot(s, other)

    def _other_slot(self, s: Seat, other: PeerLine) -> None:
        """One peer line of the other slot (see :meth:`_watch_peer`)."""
        proc = s.proc
        if other.kind == C.BP_PEER_CLIENT:
            if s.engaged_at is None:
                s.engaged_at = time.monotonic()
                self.say(f"a human joined {s.bot.id} (arena {proc.arena})" if not other.name
                         else f"human {other.name!r} joined {s.bot.id} (arena {proc.arena})")
            elif other.name and (s.opponent is None or s.opponent.name != other.name):
                self.say(f"the human in arena {proc.arena} is {other.name!r}"
                         f"{' (with a ticket)' if other.ticket else ''}")
            s.opponent = other
        elif other.kind == C.BP_PEER_EMPTY and s.engaged_at is not None:
            # the human left; a result line may still be on its way (they quit just as
            # the match ended): void only when none follows
            s.left_at = s.left_at or time.monotonic()

    def _exited(self, s: Seat) -> None:
        """The seat's bot exited without a result: void if a human was playing it."""
        proc = s.proc
        if proc.arena is None:
            self.roster.start_failed(s.bot, proc.exit_reason())
        if s.engaged_at is not None:
            self._void(s, f"{s.bot.id} (pid {proc.pid}) {proc.exit_reason()}")
        else:
            self.say(f"waiting bot {s.bot.id} (pid {proc.pid}) {proc.exit_reason()}; "
                     "a fresh one takes its seat")
            self._drop(s)

    def server_died(self, death: Death) -> None:
        """The human server went down: engaged seats are void, waiting ones just go."""
        engaged = [s for s in self.seats if s.engaged_at is not None]
        self.say(f"human server died (exit code {death.code}); restarting it on port "
                 f"{death.port}, {len(engaged)} human match(es) void")
        for s in list(self.seats):
            if s.engaged_at is not None:
                self._void(s, "human server died")
            else:
                self._drop(s)

    # ------------------------------------------------------------------ endings
    def _record(self, s: Seat, r: Result) -> None:
        res = outcome(s.proc.slot, r)
        if res is None:
            self._void(s, f"result line without a winner ({r})")
            return
        opp, ticket, note = opponent_id(s.opponent)
        r_opp = self.roster.rating(opp) if opp != ANONYMOUS_ID else INITIAL  # before it moves
        rec = self.recorder.result(s.bot.id, opp, res, r.ticks, ticket, human=True)
        tail = "; anonymous: only the bot's rating moves" if opp == ANONYMOUS_ID else ""
        self.say(f"human match {self.recorder.completed}: {s.bot.id} {VERBS[res]} {opp} "
                 f"({r.ticks} ticks; {note}){tail}")
        self.recorder.keep_replay("human", s.server_gen, s.proc.arena, r.match_id, rec,
                                  s.rating, r_opp)
        self.seats.remove(s)
        self.bot_procs.retire(s.proc, 3.0)

    def _void(self, s: Seat, reason: str) -> None:
        self.recorder.void(seat_void_kind(reason))
        who = s.opponent.name if s.opponent and s.opponent.name else "a human"
        self.say(f"VOID human match: {s.bot.id} vs {who}: {reason}")
        self._drop(s)

    def _drop(self, s: Seat) -> None:
        if s in self.seats:
            self.seats.remove(s)
        self.bot_procs.retire(s.proc, 0.0)
