"""One UDP client of ``brawlpit_server``: a connected socket plus its counters.

Kept separate from the env so tools (``bench env``'s transport measurement,
tests) can drive the raw exchange with the same socket settings.
"""

from __future__ import annotations

import socket


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
