"""One ``brawlpit_bot`` child process, read live.

The bot pool never blocks on a bot: both pipes are non-blocking and drained by
the pool's ``select`` loop, and each complete line is parsed into the few facts
the pool acts on (docs/botpool.md):

* stderr ``bot: joined HOST:PORT arena ID slot S mode M session X`` — where it
  landed (the creator's arena is what its partner joins);
* stdout ``peer slot S kind K name NAME ticket T`` — who holds a slot (``--name`` bots
  print one line per change of the *other* slot); NAME and T come from the network,
  escaped by the bot (:func:`unescape_field`), so a rogue server cannot add a line;
* stdout ``match N winner W ticks T`` — the result.

Everything else on stderr is kept as a short tail, quoted when the bot fails.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import subprocess
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from brawlkit.common.procs import end_process
from brawlkit.wire.server_process import _set_pdeathsig

_JOINED = re.compile(r"^bot: joined (\S+) arena (\d+) slot (\d+) mode (\d+)")
_RESULT = re.compile(r"^match (\d+) winner (\d+) ticks (\d+)\s*$")
# NAME may be empty (an EMPTY slot) or hold spaces; the ticket is one token, "-" = none
_PEER = re.compile(r"^peer slot (\d+) kind (\d+) name(?: (.*?))? ticket (\S*)\s*$")
# brawlpit_bot's escapes of network text (native/src/bot.c escape_field)
_ESCAPE = re.compile(r"\\(\\|x[0-9a-fA-F]{2})")


@dataclass(frozen=True)
class Result:
    """A bot's ``match N winner W ticks T`` line."""

    match_id: int
    winner: int
    ticks: int


@dataclass(frozen=True)
class PeerLine:
    """A bot's ``peer`` line: who holds ``slot`` (kind ``BP_PEER_*``)."""

    slot: int
    kind: int
    name: str
    ticket: str  # "" = none


def unescape_field(field: str) -> str:
    """A name or ticket of a bot's ``peer`` line as the server sent it.  The bot prints
    text from the network escaped (native/src/bot.c ``escape_field``): ``\\\\`` for a
    backslash, ``\\xNN`` for every byte outside printable ASCII (and in the ticket for a
    space), and ``-`` alone for an empty field (a real ``-`` is ``\\x2d``); so a newline
    a rogue server put in a name never splits the line the pool parses.  Bytes outside
    ASCII are read as UTF-8 (an undecodable one as U+FFFD): such a name is no player
    name anyway (``player_name_problem``)."""
    if field in ("", "-"):
        return ""
    raw = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(field):
        raw += field[pos:m.start()].encode("utf-8")
        esc = m.group(1)
        raw += b"\\" if esc == "\\" else bytes([int(esc[1:], 16)])
        pos = m.end()
    raw += field[pos:].encode("utf-8")
    return raw.decode("utf-8", "replace")


def parse_peer_line(line: str) -> PeerLine | None:
    m = _PEER.match(line)
    if not m:
        return None
    return PeerLine(int(m.group(1)), int(m.group(2)), unescape_field(m.group(3) or ""),
                    unescape_field(m.group(4)))


def parse_result_line(line: str) -> Result | None:
    m = _RESULT.match(line)
    return Result(int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def bot_features(binary: Path) -> set[str]:
    """The options this ``brawlpit_bot`` (or ``brawlpit_server``) build understands, read
    from its ``--help``: the pool uses ``--name``/``--mode``/``--record`` only when present,
    so it runs with a native build from before they existed."""
    try:
        out = subprocess.run([str(binary), "--help"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(re.findall(r"(--[a-z][a-z-]*)", out))


class BotProc:
    """A running ``brawlpit_bot``; :meth:`pump` reads what it printed so far."""

    def __init__(self, binary: Path, server: tuple[str, int], weights: Path,
                 args: Sequence[str], label: str) -> None:
        self.label = label
        self.args = [str(binary), "--server", f"{server[0]}:{server[1]}",
                     "--weights", str(weights), *args]
        self.proc = subprocess.Popen(  # noqa: S603 - our own binary
            self.args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, preexec_fn=_set_pdeathsig,  # noqa: PLW1509
            # its own process group: a terminal's Ctrl-C reaches the pool, which stops
            # its bots itself (a bot hit by it first would look like a crash)
            process_group=0)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._fds = {self.proc.stdout.fileno(): "out", self.proc.stderr.fileno(): "err"}
        self._buf = {"out": b"", "err": b""}
        self._open = set(self._fds)
        for fd in self._fds:
            fl = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, fl | os.O_NONBLOCK)
        self.started = time.monotonic()
        self.arena: int | None = None
        self.slot: int | None = None
        self.joined_at: float | None = None
        self.results: list[Result] = []
        self.peers: dict[int, PeerLine] = {}      # newest peer line per slot
        self.peer_history: list[PeerLine] = []
        self.err_tail: deque[str] = deque(maxlen=8)
        self.returncode: int | None = None
        self.exited_at: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def fds(self) -> list[int]:
        return list(self._open)

    def pump(self) -> None:
        """Read whatever both pipes hold and parse the complete lines."""
        for fd in list(self._open):
            which = self._fds[fd]
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError:
                    chunk = b""
                if not chunk:
                    self._open.discard(fd)
                    break
                self._buf[which] += chunk
            *lines, self._buf[which] = self._buf[which].split(b"\n")
            for raw in lines:
                self._line(which, raw.decode("utf-8", "replace").rstrip("\r"))

    def _line(self, which: str, line: str) -> None:
        if which == "err":
            m = _JOINED.match(line)
            if m:
                self.arena, self.slot = int(m.group(2)), int(m.group(3))
                self.joined_at = time.monotonic()
            elif line.strip():
                self.err_tail.append(line.strip())
            return
        r = parse_result_line(line)
        if r is not None:
            self.results.append(r)
            return
        p = parse_peer_line(line)
        if p is not None:
            self.peers[p.slot] = p
            self.peer_history.append(p)

    def poll(self) -> int | None:
        """The exit code once it has exited (negative: killed by that signal)."""
        if self.returncode is None:
            self.returncode = self.proc.poll()
            if self.returncode is not None:
                self.exited_at = time.monotonic()
                self.pump()  # the last lines it wrote before exiting
        return self.returncode

    def exit_reason(self) -> str:
        rc = self.poll()
        if rc is None:
            return "still running"
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            how = f"killed by {name}"
        else:
            how = f"exited with code {rc}"
        tail = f" ({self.err_tail[-1]})" if self.err_tail else ""
        return f"{how}{tail}"

    def stop(self, grace: float = 1.0) -> None:
        """SIGTERM (the bot sends BYE and exits), SIGKILL after ``grace`` seconds."""
        end_process(self.proc, grace_s=grace, kill_wait_s=2.0)
        self.poll()
        self.close()

    def close(self) -> None:
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None and not f.closed:
                f.close()
        self._open.clear()
