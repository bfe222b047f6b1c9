"""Who plays whom: ``pairs`` slots of bot-vs-bot matches on the pool's server.

Each slot is one match in its own arena of ONE server: the creator (``--new-arena``)
prints the arena it made, its partner then joins it (``--arena ID --no-reset``), and
the creator's ``match N winner W ticks T`` line is the result.  Anything else — a bot
dying, one that never makes or joins its arena, a match past its bound, the server
dying under it — makes the match VOID, with one log line.

Bots are drawn by fewest games started in this run (:func:`fewest_started`: ties by
the least-played pairing, then at random): uniform random draws leave some
checkpoints unplayed for a long time when there are many of them, while this gives
every bot — a checkpoint registered a minute ago included — its next game within
about ``bots / (2·pairs)`` rounds, so ratings move for all of them at the same pace.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field

from brawlkit.botpool.options import JOIN_TIMEOUT_S, RESULT_GRACE_S
from brawlkit.botpool.part import PoolPart
from brawlkit.botpool.procs import BotProc, Result
from brawlkit.botpool.recording import VERBS, outcome, pair_void_kind
from brawlkit.botpool.servers import Death
from brawlkit.botpool.sources import Bot


@dataclass
class Pair:
    """One bot-vs-bot match in flight: its ratings before the match (an upset is
    measured against them) and the server incarnation it runs on (it is void if that
    one dies)."""

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


def fewest_started(rng: random.Random, candidates: list[str], load: Counter[str],
                   pair_counts: Counter[frozenset[str]] | None = None,
                   partner: str | None = None) -> str:
    """The candidate with the fewest starts in ``load``; among those, the one that met
    ``partner`` least often (when given); among those, one at random."""
    def key(b: str) -> tuple[int, int]:
        met = pair_counts[frozenset((b, partner))] if partner and pair_counts is not None else 0
        return (load[b], met)

    best = min(key(b) for b in candidates)
    return rng.choice(sorted(b for b in candidates if key(b) == best))


class Pairing(PoolPart):
    def setup(self) -> None:
        self.hang_s = self.o.pair_hang_s()
        self.pairs: dict[int, Pair] = {}
        self.starts: Counter[str] = Counter()                 # games started, per bot
        self.pair_counts: Counter[frozenset[str]] = Counter()  # games started, per pairing
        self._warned_few = False

    def procs(self) -> list[BotProc]:
        return [p for pair in self.pairs.values() for p in (pair.proc_a, pair.proc_b) if p]

    # ------------------------------------------------------------------ new matches
    def fill(self) -> None:
        """A new match in every free slot, unless ``--matches`` are done or in flight."""
        if self.server.proc is None:
            return
        ids = sorted(self.roster.bots)
        if len(ids) < 2:
            if not self._warned_few and self.o.pairs:
                self.say(f"waiting for bots: {len(ids)} with a blob, a pair needs 2")
                self._warned_few = True
            return
        self._warned_few = False
        for slot in range(self.o.pairs):
            if slot in self.pairs:
                continue
            if self.o.matches and self.recorder.completed + len(self.pairs) >= self.o.matches:
                return
            if not self._start(slot, ids):
                return

    def _start(self, slot: int, ids: list[str]) -> bool:
        """Draw a pair and start its creator; False if the bot could not be started."""
        assert self.server.proc is not None
        a = fewest_started(self.rng, ids, self.starts)
        b = fewest_started(self.rng, [i for i in ids if i != a], self.starts,
                           self.pair_counts, a)
        if self.rng.random() < 0.5:
            a, b = b, a
        seed = self.rng.randrange(1, 2**31)
        args = ["--new-arena", "--matches", "1", "--seed", str(seed),
                *self.bot_procs.mode_args(self.o.mode)]
        bots = self.roster.bots
        try:
            proc = self.bot_procs.spawn(self.server.proc, bots[a], args, a,
                                        f"{a} (creator)")
        except OSError as e:
            self.say(f"pair {slot}: cannot start brawlpit_bot: {e}")
            return False
        self.starts[a] += 1
        self.starts[b] += 1
        self.pair_counts[frozenset((a, b))] += 1
        self.pairs[slot] = Pair(slot, bots[a], bots[b], seed, self.roster.rating(a),
                                self.roster.rating(b), self.server.gen, proc)
        return True

    # ------------------------------------------------------------------ in flight
    def advance(self, p: Pair) -> None:
        """One look at a match in flight: its result, a failure, or its partner's start."""
        a, b = p.proc_a, p.proc_b
        now = time.monotonic()
        a_rc = a.poll()  # poll first: it also reads the last lines of a bot that exited
        b_rc = b.poll() if b is not None else None
        if a.results:
            if b is not None and b_rc not in (None, 0) and not b.results:
                self._void(p, f"{p.b.id} (pid {b.pid}) {b.exit_reason()} before the result")
                return
            self._record(p, a.results[0])
            return
        if a_rc is not None:
            if a.arena is None:
                self.roster.start_failed(p.a, a.exit_reason())
            self._void(p, f"{p.a.id} (pid {a.pid}) {a.exit_reason()}")
            return
        if b is not None and b_rc is not None:
            if b_rc == 0 and b.results and b.exited_at is not None \
                    and now - b.exited_at < RESULT_GRACE_S:
                return  # the joiner saw the end first; the creator's line is on its way
            if b.arena is None:
                self.roster.start_failed(p.b, b.exit_reason())
            self._void(p, f"{p.b.id} (pid {b.pid}) {b.exit_reason()}")
            return
        if b is None:
            self._join(p, now)
            return
        if b.joined_at is None:
            if now - b.started > JOIN_TIMEOUT_S:
                self._void(p, f"{p.b.id} (pid {b.pid}) did not join arena {a.arena} within "
                           f"{JOIN_TIMEOUT_S:g} s")
        elif now - b.joined_at > self.hang_s:
            self._void(p, f"hung: no result within {self.hang_s:.0f} s")

    def _join(self, p: Pair, now: float) -> None:
        """The partner joins once the creator has printed its arena."""
        a = p.proc_a
        if a.arena is not None and self.server.proc is not None:
            args = ["--arena", str(a.arena), "--no-reset", "--matches", "1"]
            try:
                p.proc_b = self.bot_procs.spawn(self.server.proc, p.b, args, p.b.id,
                                           f"{p.b.id} (joiner)")
            except OSError as e:
                self._void(p, f"cannot start brawlpit_bot for {p.b.id}: {e}")
                return
            self.say(f"pair {p.slot}: {p.a.id} (pid {a.pid}) vs {p.b.id} "
                     f"(pid {p.proc_b.pid}) arena {a.arena} seed {p.seed}")
        elif now - a.started > JOIN_TIMEOUT_S:
            self._void(p, f"{p.a.id} (pid {a.pid}) made no arena within {JOIN_TIMEOUT_S:g} s")

    def server_died(self, death: Death) -> None:
        """The server went down: every match on that incarnation is void."""
        doomed = [p for p in self.pairs.values() if p.server_gen == death.gen]
        self.say(f"server died (exit code {death.code}); restarting it, {len(doomed)} match(es) "
                 "in flight void")
        for p in doomed:
            self._void(p, "server died")

    # ------------------------------------------------------------------ endings
    def _record(self, p: Pair, r: Result) -> None:
        res = outcome(p.proc_a.slot, r)
        if res is None:
            self._void(p, f"result line without a winner ({r})")
            return
        rec = self.recorder.result(p.a.id, p.b.id, res, r.ticks)
        self.say(f"match {self.recorder.completed}: {p.a.id} {VERBS[res]} {p.b.id} ({r.ticks} "
                 f"ticks; elo before {p.rating_a:.0f} vs {p.rating_b:.0f}) [pair {p.slot}, "
                 f"arena {p.proc_a.arena}]")
        self.recorder.keep_replay("pool", p.server_gen, p.proc_a.arena, r.match_id, rec,
                                  p.rating_a, p.rating_b)
        self._retire(p, grace=3.0)
        self.roster.started(p.a.id, p.b.id)

    def _void(self, p: Pair, reason: str) -> None:
        self.recorder.void(pair_void_kind(reason))
        self.say(f"VOID pair {p.slot}: {p.a.id} vs {p.b.id}: {reason}")
        self._retire(p, grace=0.0)

    def _retire(self, p: Pair, grace: float) -> None:
        self.pairs.pop(p.slot, None)
        for proc in (p.proc_a, p.proc_b):
            if proc is not None:
                self.bot_procs.retire(proc, grace)
