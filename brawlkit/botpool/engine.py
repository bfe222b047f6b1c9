"""The bot pool engine: one ``select`` loop over every child process.

:class:`BotPool` composes the pool's parts and runs them in one thread, in a fixed
order each step (docs/botpool.md has the rules):

* :class:`~brawlkit.botpool.roster.Roster` — which bots may play, their live Elo;
* :class:`~brawlkit.botpool.servers.Servers` and
  :class:`~brawlkit.botpool.servers.BotProcesses` — the pool's own two
  ``brawlpit_server`` (restarted when they die) and its ``brawlpit_bot`` children;
* :class:`~brawlkit.botpool.pairing.Pairing` — who plays whom, bot against bot;
* :class:`~brawlkit.botpool.seats.Seats` — bots waiting for humans;
* :class:`~brawlkit.botpool.recording.Recorder` — results to the match log and the
  registry, void counts, upsets' replays.

One thread on purpose: every decision about a match (record it, void it, start the
next) is taken where all its facts are, with no lock.  Only two things run beside
it, and both only hand over through a queue or one locked slot: the registry poster
and the bot-set refresher.
"""

from __future__ import annotations

import queue
import random
import select
import signal
import time
from types import FrameType
from typing import Any

from rich.live import Live

from brawlkit.botpool.active import ActiveWatch
from brawlkit.botpool.options import JOIN_TIMEOUT_S, Options
from brawlkit.botpool.pairing import Pairing
from brawlkit.botpool.procs import BotProc
from brawlkit.botpool.recording import Recorder
from brawlkit.botpool.roster import Roster
from brawlkit.botpool.seats import Seats, opponent_id
from brawlkit.botpool.servers import BotProcesses, Servers, server_can_record
from brawlkit.botpool.sources import gather
from brawlkit.botpool.status import BotRow, StatusView, render
from brawlkit.league.directory import LeagueDir
from brawlkit.wire.server_process import ServerError


class BotPool:
    #: (member id, ticket, note) of the human a seat played
    opponent_id = staticmethod(opponent_id)

    def __init__(self, opts: Options, league: LeagueDir | None, client: Any | None) -> None:
        self.o = opts
        self.league, self.client = league, client
        self.messages: queue.Queue[str] = queue.Queue()   # from the poster and refresher
        self.bot_procs = BotProcesses()
        self.roster = Roster(self.say)
        self.recorder = Recorder(opts, league, client, self.messages, self.say,
                                 self.roster.apply, server_can_record())
        self.servers = Servers(opts, self.recorder.record_dir, self.say)
        rng = random.Random(opts.seed)   # one stream for pairs and seats: --seed replays both
        self.pairing = Pairing(opts, rng, self.roster, self.recorder, self.servers.pool,
                               self.bot_procs, self.say)
        self.seats = Seats(opts, rng, self.roster, self.recorder, self.servers.human,
                           self.bot_procs, self.say)
        # the registry's active checkpoint, followed for the human seats (docs/botpool.md)
        self.active: ActiveWatch | None = None
        if client is not None and opts.human_bots and opts.seat_bots == "active":
            self.active = ActiveWatch(client.twin() if hasattr(client, "twin") else client,
                                      self.messages)
        self.abandoned = 0
        self._stop = False
        self._signals = 0
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

    def status_view(self) -> StatusView:
        """What the live table shows, as of now."""
        rec, roster = self.recorder, self.roster
        ids = sorted(set(roster.bots) | set(rec.wdl), key=lambda i: -roster.rating(i))
        rows = []
        for i in ids:
            w, d, losses = rec.wdl.get(i, [0, 0, 0])
            rows.append(BotRow(i, roster.rating(i), w, d, losses, self.pairing.starts[i]))
        poster = rec.poster
        return StatusView(
            now=time.monotonic(), up_since=self.t0, completed=rec.completed,
            target=self.o.matches, human_completed=rec.human_completed, voids=rec.voids,
            server_restarts=self.servers.restarts, bot_count=len(roster.bots),
            registry=None if poster is None else (poster.posted, poster.queued),
            pairs=list(self.pairing.pairs.values()),
            seats=list(self.seats.seats) if self.o.human_bots else None, bots=rows)

    # ------------------------------------------------------------------ loop
    def procs(self) -> list[BotProc]:
        return self.pairing.procs() + self.seats.procs() + self.bot_procs.lingering()

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        self._stop = True
        if self._signals >= 3:  # the third Ctrl-C: give up on a clean stop
            raise KeyboardInterrupt

    def step(self, timeout: float = 0.1) -> None:
        """Wait up to ``timeout`` for any bot to print, then act on everything once."""
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
        self.roster.take()
        self._take_active()
        self._check_servers()
        for pair in list(self.pairing.pairs.values()):
            self.pairing.advance(pair)
        for seat in list(self.seats.seats):
            self.seats.advance(seat)
        self.bot_procs.reap()
        # re-checked before each: a signal during this step starts no new bot
        if not self._stop:
            self.pairing.fill()
        if not self._stop:
            self.seats.fill()
        self.recorder.poll_replays()

    def _take_active(self) -> None:
        """Adopt a new active checkpoint for the seats (ActiveWatch read it)."""
        if self.active is None:
            return
        previous = self.active.current
        if not self.active.take():
            return
        bot = self.active.current
        self.seats.active = bot
        self.say(f"active checkpoint: {bot.id}; the human seats play it" if bot is not None
                 else "no active checkpoint: the human seats draw from every bot")
        self.seats.active_changed(previous.id if previous is not None else None)

    def _check_servers(self) -> None:
        """A dead server voids what ran on it and is brought back."""
        if self.o.pairs:
            self.servers.pool.check(self.pairing.server_died)
            if not self._stop:
                self.servers.restart_pool()
        self.servers.human.check(self.seats.server_died)
        if self.o.human_bots:
            self.servers.restart_human()

    def run(self) -> int:
        """The whole run: servers up, bots playing until ``--matches`` or a signal; the
        exit code (1: a server would not start)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        self._drain_messages()
        try:
            self.roster.take(gather(self.league, self.client))
        except Exception as e:  # noqa: BLE001 - e.g. the registry is down: retried at each refresh
            self.say(f"no bots yet, retried every {self.o.refresh:g} s: {e}")
        if self.active is not None:  # before the first seat: it plays the active one
            self.active.poll()
            self._drain_messages()
            self._take_active()
        try:
            self._start_servers()
        except ServerError as e:
            print(f"botpool: {e}", flush=True)
            self._shutdown()
            return 1
        self.roster.refresh_in_background(self.o.refresh, lambda: gather(self.league, self.client),
                                          self.messages, lambda: self._stop)
        if self.active is not None:
            self.active.run_in_background(self.o.active_refresh, lambda: self._stop)
        try:
            if self.o.live:
                self._run_live()
            else:
                self._loop()
        finally:
            self._stop = True
            self._shutdown()
        return 0

    def _start_servers(self) -> None:
        """Both servers up; the human one announced only once its bots wait in their
        arenas: a human arriving earlier would find no arena and create one of their
        own (HELLO ANY)."""
        o = self.o
        if o.pairs:
            pool = self.servers.pool.start()
            print(f"pool server listening {pool.port} ({o.mode}"
                  f"{f', speed {o.speed:g}' if o.mode == 'fastforward' else ''})", flush=True)
        if o.human_bots:
            human = self.servers.human.start(o.human_port)
            deadline = time.monotonic() + JOIN_TIMEOUT_S
            while time.monotonic() < deadline and not self._stop and self.roster.bots \
                    and not self.seats.ready():
                self.step(0.05)
            print(f"human server listening {human.port}", flush=True)

    def _done(self) -> bool:
        return bool(self.o.matches) and self.recorder.completed >= self.o.matches

    def _loop(self) -> None:
        while not self._stop:
            self.step()
            if self._done():
                break

    def _run_live(self) -> None:
        with Live(render(self.status_view()), refresh_per_second=2, transient=False) as live:
            self._live = live
            last = 0.0
            try:
                while not self._stop:
                    self.step()
                    if time.monotonic() - last > 0.5:
                        live.update(render(self.status_view()))
                        last = time.monotonic()
                    if self._done():
                        break
                live.update(render(self.status_view()))
            finally:
                self._live = None
        print(flush=True)  # the summary starts on a line of its own, under the table

    def _shutdown(self) -> None:
        """Stop every bot and server, flush the results, print the summary."""
        in_flight = self.procs()
        self.abandoned = len(self.pairing.pairs) + self.seats.engaged()
        for p in in_flight:
            if p.poll() is None:
                try:
                    p.proc.terminate()
                except ProcessLookupError:
                    pass
        for p in in_flight:
            p.stop(grace=2.0)
        self.pairing.pairs.clear()
        self.seats.seats.clear()
        self.bot_procs.reaping.clear()
        self.servers.close()
        unposted = self.recorder.close()
        self._drain_messages()
        self.recorder.save_unposted(unposted)
        print(self.summary(), flush=True)

    def summary(self) -> str:
        rec = self.recorder
        mins = (time.monotonic() - self.t0) / 60
        parts = [f"summary: {rec.completed} match(es) ({rec.human_completed} with humans)",
                 f"{rec.voids} void", f"{self.servers.restarts} server restart(s)",
                 f"{self.abandoned} stopped in flight", f"{len(self.roster.bots)} bots",
                 f"{mins:.1f} min", *rec.summary_parts()]
        line = ", ".join(parts)
        if rec.void_reasons:
            line += "\nvoid: " + "; ".join(f"{k} x{v}" for k, v in rec.void_reasons.most_common())
        return line
