"""Start and own ``brawlpit_server`` processes.

Why this is more than ``subprocess.Popen``:

* **Ports.** The server binds port 0 and prints ``listening <port>``; we read
  that line instead of picking a "free" port ourselves, so eight envs started
  at once can never race for the same port (the classic hang of parallel
  fighting-game envs).
* **No orphans.** The child asks the kernel for SIGTERM when its parent dies
  (``PR_SET_PDEATHSIG``, set here before exec and again by the server itself),
  and we also terminate it from ``close()``, a weakref finalizer and atexit.
  A Python process killed with SIGKILL therefore leaves no server behind.
* **Diagnosable failures.** stderr goes to a log file whose tail is quoted in
  every error, so "the server died" always says why.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import select
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from brawlkit.common.io import Closing
from brawlkit.common.paths import native_path
from brawlkit.common.procs import end_process
from brawlkit.wire.constants import MODES

_LISTEN = re.compile(rb"^listening (\d+)\s*$")
_PR_SET_PDEATHSIG = 1


#: how long a client may stay silent before the server drops it (--client-timeout):
#: brawlkit's own servers die with the Python process, so only a client that really
#: vanished (or a notebook idle for 10 minutes) is dropped
DEFAULT_CLIENT_TIMEOUT_S = 600.0

#: lockstep server busy-poll window when a core is spare (see spin_rule)
DEFAULT_SPIN_US = 2000


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def spin_rule(parallel: int) -> int:
    """Busy-poll window (``--spin-us``) of a lockstep server stepped with ``parallel - 1`` other
    server *processes* (however many arenas each hosts).

    Spinning keeps a server awake between a snapshot and the next command, which
    saves the wake-up that dominates a lockstep round trip (measured on the
    2-core VM: PPO at n_envs 1 went from 0.64 to 0.83 of the zero-cost-env rate).
    It only pays while the spinning servers leave the trainer a core of its own:
    two spinning servers on two cores starve the trainer (0.62 -> 0.22).  So:
    spin when ``parallel < usable cores``, else block.  ``BRAWLKIT_SERVER_SPIN_US``
    overrides (0 disables).  :class:`ServerProcess` applies it; nothing else should.
    """
    env = os.environ.get("BRAWLKIT_SERVER_SPIN_US")
    if env is not None:
        return max(0, int(env))
    return DEFAULT_SPIN_US if parallel < usable_cores() else 0


#: brawlpit_server's own --max-arenas default (native/src/server.c DEFAULT_MAX_ARENAS)
DEFAULT_MAX_ARENAS = 64


def default_server_count(n_envs: int) -> int:
    """Server processes for ``n_envs`` envs stepped together, each hosting a share of them
    as arenas: one per core the trainer leaves free (so every server may busy-poll),
    never more than there are envs.  On 2 cores: one server for all envs."""
    return max(1, min(n_envs, usable_cores() - 1))


class ServerError(RuntimeError):
    """The game server could not be started, or died while in use."""


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort; the server sets it again itself
        pass


_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for srv in list(_LIVE):
        srv.close()


class ServerProcess:
    """One ``brawlpit_server`` child process.

    ``spin_us``: the lockstep server's busy-poll window; None decides it by
    :func:`spin_rule` from ``parallel``, the number of servers that will be
    stepped together (0 always blocks).

    >>> with ServerProcess(mode="lockstep", cpu_level=3) as srv:
    ...     srv.address  # ('127.0.0.1', 40213)
    """

    def __init__(
        self,
        mode: str = "lockstep",
        *,
        speed: float | None = None,
        cpu_level: int | None = None,
        seed: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        spin_us: int | None = None,
        parallel: int = 1,
        max_arenas: int | None = None,
        client_timeout: float | None = DEFAULT_CLIENT_TIMEOUT_S,
        extra_args: Sequence[str] = (),
        start_timeout: float = 10.0,
        binary: str | os.PathLike[str] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.host = host
        #: seconds of silence after which the server forgets a client (None: its default)
        self.client_timeout = client_timeout
        self.binary = Path(binary) if binary else native_path("brawlpit_server")
        if mode != "lockstep":
            spin_us = 0  # the free-running modes never wait for a command
        elif spin_us is None:
            spin_us = spin_rule(parallel)
        self.spin_us = int(spin_us)
        args = [str(self.binary), "--host", host, "--port", str(port), "--mode", mode]
        if speed is not None:
            args += ["--speed", repr(float(speed))]
        if cpu_level is not None:
            args += ["--cpu-level", str(int(cpu_level))]
        if seed is not None:
            args += ["--seed", str(int(seed))]
        if self.spin_us:
            args += ["--spin-us", str(self.spin_us)]
        if max_arenas is not None:
            args += ["--max-arenas", str(int(max_arenas))]
        if client_timeout is not None:
            args += ["--client-timeout", repr(float(client_timeout))]
        args += list(extra_args)
        self.args = args
        self.port: int = -1
        self._log = tempfile.NamedTemporaryFile(prefix="brawlpit_server_", suffix=".log", delete=False)
        self.log_path = Path(self._log.name)
        self.proc: subprocess.Popen[bytes] | None = None
        self._start_timeout = start_timeout
        self._closed = False
        self._spawn()
        self._finalizer = weakref.finalize(self, _terminate, self.proc, self.log_path)
        _LIVE.add(self)

    # -- lifecycle -----------------------------------------------------------------
    def _spawn(self) -> None:
        env = dict(os.environ)
        self.proc = subprocess.Popen(  # noqa: S603 - our own binary
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            preexec_fn=_set_pdeathsig,  # noqa: PLW1509 - single-purpose, async-signal-safe enough
            env=env,
        )

    def wait_ready(self) -> ServerProcess:
        """Block until the server printed its port (spawned in ``__init__``)."""
        if self.port > 0:
            return self
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + self._start_timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        while time.monotonic() < deadline:
            r, _, _ = select.select([fd], [], [], 0.05)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:  # EOF: the process is gone
                    break
                buf += chunk
                for line in buf.splitlines():
                    m = _LISTEN.match(line)
                    if m:
                        self.port = int(m.group(1))
                        return self
            if self.proc.poll() is not None:
                break
        try:
            code: int | None = self.proc.wait(timeout=1.0)  # EOF usually means it is exiting
        except subprocess.TimeoutExpired:
            code = None
        self.close()
        state = f"exited with code {code}" if code is not None else "did not print its port in time"
        raise ServerError(
            f"brawlpit_server {state} ({' '.join(self.args)}); log tail:\n{self.log_tail()}"
        )

    @property
    def address(self) -> tuple[str, int]:
        self.wait_ready()
        return (self.host, self.port)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        """Raise ServerError (with the log tail) if the process has exited."""
        if not self.alive():
            code = self.proc.poll() if self.proc else None
            raise ServerError(
                f"brawlpit_server (pid {self.proc.pid if self.proc else '?'}, port {self.port}) "
                f"is not running (exit code {code}); log tail:\n{self.log_tail()}"
            )

    def stats(self, timeout: float = 2.0) -> dict[str, int]:
        """Ask the server for its counters (SIGUSR1) and parse its ``stats`` line."""
        self.check_alive()
        before = self.log_path.read_bytes().count(b"stats ")
        assert self.proc is not None
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()
            complete = text[:text.rfind(b"\n") + 1]  # the server may be mid-write
            if complete.count(b"stats ") > before:
                return parse_stats_line(complete)
            time.sleep(0.01)
        raise ServerError(f"no stats line from brawlpit_server within {timeout}s")

    def log_tail(self, n: int = 20) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:]) or "(empty log)"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        _terminate(self.proc, None)
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        self._finalizer.detach() if hasattr(self, "_finalizer") else None
        _LIVE.discard(self)

    def remove_log(self) -> None:
        try:
            self.log_path.unlink()
        except OSError:
            pass

    def __enter__(self) -> ServerProcess:
        return self.wait_ready()

    def __exit__(self, *exc: object) -> None:
        self.close()
        self.remove_log()


def _terminate(proc: subprocess.Popen[bytes] | None, log_path: Path | None) -> None:
    end_process(proc, grace_s=2.0, kill_wait_s=2.0)


def parse_stats_line(text: bytes | str) -> dict[str, int]:
    """The last ``stats key=value ...`` line of a server log as a dict."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    lines = [ln for ln in text.splitlines() if ln.startswith("stats ")]
    if not lines:
        raise ValueError("no stats line in server log")
    out: dict[str, int] = {}
    for tok in lines[-1].split()[1:]:
        k, _, v = tok.partition("=")
        if v.lstrip("-").isdigit():
            out[k] = int(v)
    return out


class ServerGroup(Closing):
    """The server processes a set of envs stepped together shares: ``n_envs`` arenas
    spread over ``servers`` processes (0 = :func:`default_server_count`), each told
    how many processes run side by side so :func:`spin_rule` decides its busy-poll, and
    allowed twice its share of arenas (``--max-arenas``).

    >>> group = ServerGroup(8)                 # 2 cores: one process, 8 arenas
    >>> envs = [BrawlpitEnv(server=group.server_for(i)) for i in range(8)]
    """

    def __init__(self, n_envs: int, servers: int = 0, **kwargs: Any) -> None:
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        if servers < 0:
            raise ValueError(f"servers must be >= 0 (0 = automatic), got {servers}")
        k = servers or default_server_count(n_envs)
        k = min(k, n_envs)
        kwargs.setdefault("parallel", k)
        # room for every env's arena on its server, twice over (an env that re-joins after
        # a timeout holds a second arena until the first is reclaimed): a wide run never
        # fails on the server's default limit (64) when its evaluation envs join
        kwargs.setdefault("max_arenas", max(DEFAULT_MAX_ARENAS, 2 * -(-n_envs // k)))
        self.servers: list[ServerProcess] = []
        try:
            for _ in range(k):  # spawned first, then waited for: start-up overlaps
                self.servers.append(ServerProcess(**kwargs))
            for srv in self.servers:
                srv.wait_ready()
        except BaseException:
            self.close()
            raise

    def server_for(self, i: int) -> ServerProcess:
        """The server of env ``i`` (round robin)."""
        return self.servers[i % len(self.servers)]

    def close(self) -> None:
        for srv in self.servers:
            srv.close()
            srv.remove_log()

