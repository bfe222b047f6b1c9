"""The pool's child processes: its two ``brawlpit_server`` and its ``brawlpit_bot``.

* :class:`GameServer` — one server across its incarnations.  Its generation ``gen``
  counts them: a pair or seat remembers the ``gen`` it started on, so when a server
  dies exactly the matches that ran on *that* incarnation are void, never one that
  started on its replacement.
* :class:`Servers` — the bot-vs-bot server (fastforward or realtime, local only) and
  the human server (realtime, on ``--human-host``), restarted when they die.  The
  human one comes back on the same port first, because people were told that port.
* :class:`BotProcesses` — starting a bot on a server, and reaping the ones that are
  done: a retired bot is never waited for in the loop; it gets a deadline, SIGTERM
  past it, SIGKILL two seconds later.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brawlkit.botpool.options import Options
from brawlkit.botpool.procs import BotProc, bot_features
from brawlkit.botpool.sources import Bot
from brawlkit.common.paths import native_path
from brawlkit.wire.constants import C
from brawlkit.wire.server_process import ServerError, ServerProcess

#: a client silent this long loses its slot: a SIGKILLed bot never says BYE
POOL_CLIENT_TIMEOUT_S = 10.0
HUMAN_CLIENT_TIMEOUT_S = 15.0
#: a human server that could not be restarted is tried again this much later
HUMAN_RETRY_S = 2.0


def wire_name(member_id: str, limit: int = C.BP_NAME_LEN - 1) -> str:
    """``member_id`` as a name the wire carries (IDENT: at most ``BP_NAME_LEN`` - 1
    characters). Training ids are longer (``league_exploiter-<run>-g0041`` is 41), and a
    bot refuses a longer ``--name``; the pool knows which bot it started, so the name is
    only for people: keep the role's start and the generation's end, ``~`` between."""
    if len(member_id) <= limit:
        return member_id
    tail = min(limit // 2, len(member_id))
    return member_id[:limit - tail - 1] + "~" + member_id[-tail:]


def server_can_record() -> bool:
    """Whether this ``brawlpit_server`` build has ``--record`` (older ones do not, and
    the pool still runs with them: it keeps no replays then)."""
    return "--record" in bot_features(native_path("brawlpit_server"))


@dataclass(frozen=True)
class Death:
    """A server found dead: which incarnation, its exit code, the port it had."""

    gen: int
    code: int | None
    port: int


#: (port, extra arguments) -> a started, not yet ready, server
Launch = Callable[[int, list[str]], ServerProcess]
#: (server kind, generation) -> where that incarnation records its replays, or None
RecordDir = Callable[[str, int], Path | None]


class GameServer:
    def __init__(self, kind: str, launch: Launch, record_dir: RecordDir, port: int = 0) -> None:
        self.kind = kind
        self._launch = launch
        self._record_dir = record_dir
        self.proc: ServerProcess | None = None
        self.gen = 0
        self.port = port   # the latest incarnation's (before the first: the one asked for)

    def start(self, port: int = 0) -> ServerProcess:
        """A new incarnation (``gen`` + 1, counted even when it fails to come up)."""
        self.gen += 1
        d = self._record_dir(self.kind, self.gen)
        self.proc = self._launch(port, [] if d is None else ["--record", str(d)]).wait_ready()
        self.port = self.proc.port
        return self.proc

    def check(self, on_death: Callable[[Death], None]) -> None:
        """If it died: ``on_death`` (void what ran on it), then close it;
        :meth:`Servers.restart_pool` and :meth:`Servers.restart_human` bring up the next
        incarnation."""
        if self.proc is None or self.proc.alive():
            return
        code = self.proc.proc.poll() if self.proc.proc else None
        on_death(Death(self.gen, code, self.proc.port))
        self.close()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc.remove_log()
            self.proc = None


class Servers:
    def __init__(self, opts: Options, record_dir: RecordDir,
                 say: Callable[[str], None]) -> None:
        self.o = opts
        self.say = say
        self.pool = GameServer("pool", self._launch_pool, record_dir)
        self.human = GameServer("human", self._launch_human, record_dir, opts.human_port)
        self.restarts = 0
        self._human_retry_at = 0.0

    def _launch_pool(self, port: int, extra: list[str]) -> ServerProcess:
        o = self.o
        return ServerProcess(
            mode=o.mode, speed=o.speed if o.mode == "fastforward" else None, port=port,
            client_timeout=POOL_CLIENT_TIMEOUT_S, max_arenas=max(64, 2 * o.pairs + 8),
            extra_args=extra)

    def _launch_human(self, port: int, extra: list[str]) -> ServerProcess:
        o = self.o
        return ServerProcess(
            mode="realtime", host=o.human_host, port=port,
            client_timeout=HUMAN_CLIENT_TIMEOUT_S, max_arenas=max(64, 2 * o.human_bots + 8),
            extra_args=extra)

    def restart_pool(self) -> None:
        """Bring the bot-vs-bot server back if it is down; a failed attempt waits a
        second (the loop would otherwise spin on it) and is retried next step."""
        if self.pool.proc is not None:
            return
        try:
            self.pool.start()
        except ServerError as e:
            self.say(f"server restart failed: {e}")
            time.sleep(1.0)
            return
        if self.pool.gen > 1:
            self.restarts += 1
            self.say(f"server restarted on port {self.pool.port}")

    def restart_human(self) -> None:
        """Bring the human server back if it is down: on its old port (humans know it),
        else on any; when both fail, again in :data:`HUMAN_RETRY_S`."""
        if self.human.proc is not None or not self.human.gen \
                or time.monotonic() < self._human_retry_at:
            return
        for port in (self.human.port, 0):
            try:
                self.human.start(port)
            except ServerError as e:
                self.say(f"human server restart on port {port} failed: {e}")
                continue
            self.restarts += 1
            self.say(f"human server listening {self.human.port}")
            return
        self._human_retry_at = time.monotonic() + HUMAN_RETRY_S

    def close(self) -> None:
        self.pool.close()
        self.human.close()


class BotProcesses:
    def __init__(self) -> None:
        self.binary = native_path("brawlpit_bot")
        self.features = bot_features(self.binary)
        self.reaping: list[tuple[BotProc, float]] = []   # (bot, when to stop waiting)

    def spawn(self, server: ServerProcess, bot: Bot, args: list[str], name: str,
              label: str) -> BotProc:
        """``bot`` on ``server``, named ``name`` on the wire where the build allows."""
        extra = list(args)
        if "--name" in self.features:
            extra += ["--name", wire_name(name)]
        return BotProc(self.binary, server.address, bot.blob, extra, label)

    def mode_args(self, mode: str) -> list[str]:
        """``--mode MODE`` for a build that has it (older ones take the server's)."""
        return ["--mode", mode] if "--mode" in self.features else []

    def retire(self, proc: BotProc, grace: float) -> None:
        """Done with ``proc``: it may exit on its own within ``grace`` seconds (0: it is
        SIGTERMed now); :meth:`reap` collects it."""
        if grace <= 0 and proc.poll() is None:
            try:
                proc.proc.terminate()
            except ProcessLookupError:
                pass
        self.reaping.append((proc, time.monotonic() + max(grace, 1.0)))

    def reap(self) -> None:
        """Close the retired bots that exited; SIGTERM the late, SIGKILL the later."""
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

    def lingering(self) -> list[BotProc]:
        """The retired bots not yet reaped."""
        return [p for p, _ in self.reaping]
