"""A listening TCP socket for the HTTP services (the registry, the ``/move`` endpoint).

Why one place: both bind before uvicorn starts, so they can print ``listening <port>``
with the kernel's port for ``--port 0`` (no port races in scripts and tests), and both
need the same detail right: the socket is made with ``IPPROTO_TCP`` explicitly, because
asyncio sets ``TCP_NODELAY`` on accepted connections only for such sockets; without it
every answer on a kept-alive connection waits ~40 ms for a delayed ACK (Nagle).
"""

from __future__ import annotations

import socket


def listen_tcp(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A bound, listening TCP socket on ``host:port`` (``0`` = the kernel's choice;
    ``sock.getsockname()[1]`` is the port). Raises ``OSError`` naming the cause."""
    info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(info[0], socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(info[4])
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock
