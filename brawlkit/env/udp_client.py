"""One UDP client of ``brawlpit_server``: a connected socket plus its counters.

Kept separate from the env so tools (``bench env``'s transport measurement,
tests) can drive the raw exchange with the same socket settings.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.server_process import ServerError, ServerProcess

#: how often a request still unanswered is sent again (s): a lost datagram either way
#: costs this much, and CMD, HELLO and a same-nonce RESET are idempotent server-side
RESEND_S = 0.05
#: how often a wait checks that the server process is alive (s)
ALIVE_CHECK_S = 0.1
#: how long a wait keeps going for a local server process the env watches (its own, or
#: one it was given) that is alive but silent past ``recv_timeout`` (s).  A dead one is
#: noticed within ALIVE_CHECK_S, so such silence means the machine is starving it of CPU:
#: a league role, sharing 2 cores with a test suite, died of a 5 s wait on a live server.
#: ``recv_timeout`` alone still bounds the wait for a server at an address (not watched).
LOCAL_SERVER_PATIENCE_S = 120.0


class UdpClient:
    """A connected datagram socket holding one joined slot's session state."""

    #: receive buffer: a fastforward server broadcasts every tick, so a slow
    #: client needs room for a backlog it then drains to the freshest snapshot
    RCVBUF = 1 << 20
    #: the largest datagram the protocol defines is far below this
    MAX_DATAGRAM = 256

    def __init__(self, address: tuple[str, int], poll_us: float) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.RCVBUF)
        self.sock.connect(address)
        self.fd = self.sock.fileno()
        self.seq = 0
        self.cmd_seq = 0
        self.session = 0
        self.slot = -1
        self.poll_s = poll_us * 1e-6
        self.last_cmds: list[bytes] = []

    def send(self, data: bytes) -> None:
        self.seq += 1
        try:
            self.sock.send(data)
        except ConnectionRefusedError:
            pass  # an ICMP from an earlier datagram; the waiting side reports a dead server

    def next_seq(self) -> int:
        return self.seq + 1

    def recv_nowait(self) -> bytes | None:
        try:
            return self.sock.recv(self.MAX_DATAGRAM, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError, ConnectionRefusedError):
            return None

    def close(self) -> None:
        self.sock.close()


def send_step_commands(client: UdpClient, sched: list[tuple[int, Any]], cmd: Any, t0: int,
                       repeat: int, input_delay: int) -> None:
    """Send ``client``'s commands covering ticks ``[t0, t0 + repeat)`` (lockstep).

    The action ``cmd`` (stick_x, stick_y, buttons) chosen at observation tick ``t0``
    takes effect at ``t0 + input_delay``; ``sched`` (the client's own list, kept between
    steps) holds (effective tick, command), so the ticks the server needs now are covered
    by the commands chosen ``input_delay`` ticks earlier — one CMD per stretch of equal
    input (docs/protocol.md, input delay). With no delay this is exactly one CMD, applied
    at once. The packets sent are kept in ``client.last_cmds`` for re-sending.
    """
    if input_delay == 0:  # the common case
        client.cmd_seq += 1
        pkt = P.pack_cmd(client.next_seq(), client.session, t0, client.cmd_seq,
                         cmd[0], cmd[1], cmd[2], client.slot, repeat)
        client.last_cmds = [pkt]
        client.send(pkt)
        return
    sched.append((t0 + input_delay, cmd))
    while len(sched) > 1 and sched[1][0] <= t0:
        sched.pop(0)
    client.last_cmds = []
    end = t0 + repeat
    for i, (eff, c) in enumerate(sched):
        start = max(eff, t0)
        stop = min(sched[i + 1][0], end) if i + 1 < len(sched) else end
        if stop <= start:
            continue
        client.cmd_seq += 1
        pkt = P.pack_cmd(client.next_seq(), client.session, start, client.cmd_seq,
                         c[0], c[1], c[2], client.slot, stop - start)
        client.last_cmds.append(pkt)
        client.send(pkt)


def receive_until(client: UdpClient, accept: Callable[[bytes], bool], timeout: float,
                  resend: Sequence[bytes] = (), check: Callable[[], None] = lambda: None,
                  ) -> bytes | None:
    """Receive on ``client`` until ``accept(datagram)`` and return that datagram; None
    after ``timeout`` seconds. Busy-polls for the client's ``poll_s`` first (an answer
    within it skips a wake-up), then blocks in ``select``; re-sends ``resend`` every
    :data:`RESEND_S` so a lost datagram cannot stall a lockstep exchange; calls ``check``
    (which raises if the server died) every :data:`ALIVE_CHECK_S`."""
    t0 = time.perf_counter()
    spin_until, next_check = t0 + client.poll_s, t0 + ALIVE_CHECK_S
    next_resend, deadline = t0 + RESEND_S, t0 + timeout
    while True:
        data = client.recv_nowait()
        if data is not None:
            if accept(data):
                return data
            continue
        now = time.perf_counter()
        if now < spin_until:
            continue
        if now >= next_check:
            check()
            next_check = now + ALIVE_CHECK_S
        if resend and now >= next_resend:
            for pkt in resend:
                client.send(pkt)
            next_resend = now + RESEND_S
        if now >= deadline:
            return None
        select.select([client.fd], [], [], min(0.01, max(0.0, deadline - now)))


class EnvError(RuntimeError):
    """The env lost its server or received nothing usable in time."""


class ServerLink:
    """What an env that plays on a ``brawlpit_server`` needs, written once: the server's
    address, the dead-server check, the receive loop with its errors, and the
    HELLO/WELCOME join (:class:`~brawlkit.env.BrawlpitEnv` and the PettingZoo view both
    inherit it).  The subclass sets ``server``, ``_address``, ``recv_timeout`` and
    ``_poll_us``."""

    server: ServerProcess | None
    _address: tuple[str, int] | None
    recv_timeout: float
    _poll_us: float

    @property
    def address(self) -> tuple[str, int]:
        if self._address is None:
            assert self.server is not None
            self._address = self.server.address
        return self._address

    def _dead(self) -> None:
        """Raise :class:`EnvError` with the server's log tail if its process has died."""
        if self.server is not None and not self.server.alive():
            try:
                self.server.check_alive()
            except ServerError as e:
                raise EnvError(f"the game server died: {e}") from None

    def _wait(self, client: UdpClient, accept: Callable[[bytes], bool],
              resend: bytes | Sequence[bytes] | None = None, timeout: float | None = None) -> bytes:
        """Receive until ``accept(datagram)`` (:func:`receive_until`: busy-poll, then
        select; ``resend`` re-sent so a lost datagram cannot stall a lockstep exchange); a
        dead server or no answer raises :class:`EnvError`.  A local server process that is
        still alive after ``timeout`` is waited for up to :data:`LOCAL_SERVER_PATIENCE_S`
        in all: on a loaded machine it is starved, not gone."""
        timeout = self.recv_timeout if timeout is None else timeout
        again = [resend] if isinstance(resend, bytes) else list(resend or [])
        data = receive_until(client, accept, timeout, again, self._dead)
        if data is None and self.server is not None and timeout < LOCAL_SERVER_PATIENCE_S:
            self._dead()
            data = receive_until(client, accept, LOCAL_SERVER_PATIENCE_S - timeout, again,
                                 self._dead)
            timeout = LOCAL_SERVER_PATIENCE_S
        if data is None:
            self._dead()
            raise EnvError(
                f"no answer from brawlpit_server at {self.address} within {timeout:.1f}s "
                f"(slot {client.slot}); is it running and reachable?"
            )
        return data

    def _hello(self, want_slot: int, nonce: int, what: str, **hello: Any) -> tuple[UdpClient, Any]:
        """HELLO (``pack_hello`` keywords ``hello``) until the WELCOME carrying ``nonce``:
        the joined client, with its session and slot set, and the ``NetWelcome``.  An
        ERROR reply raises :class:`EnvError` naming ``what`` was asked for."""
        client = UdpClient(self.address, self._poll_us)
        packet = P.pack_hello(client.next_seq(), want_slot, nonce, **hello)
        client.send(packet)

        def accept(d: bytes) -> bool:
            try:
                hdr = P.validate_datagram(d)
            except P.ProtocolError:
                return False
            if hdr.type == C.BP_PKT_ERROR:
                err = P.parse_payload(d, P.NetError)
                raise EnvError(f"server at {self.address} refused HELLO for {what}: "
                               f"code {err.code} {err.text.decode(errors='replace')}")
            return hdr.type == C.BP_PKT_WELCOME and P.parse_payload(d, P.NetWelcome).nonce == nonce

        try:
            w = P.parse_payload(self._wait(client, accept, resend=packet), P.NetWelcome)
        except BaseException:
            client.close()
            raise
        client.session, client.slot = w.session, w.slot
        return client, w
