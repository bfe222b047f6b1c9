"""The per-step data path between :class:`~brawlkit.distributed.ray_vecenv.RayVecEnv` and its
:class:`~brawlkit.distributed.worker.EnvWorker` actors: one TCP connection per worker.

Why not Ray for the steps: an actor call costs ~0.7 ms on a 2-core box (task
submission, the raylet, serialisation, the reply), about as much as a whole local step
of 16 envs, and a step makes one per worker (plus one more when episodes end).  A
direct socket costs a few tens of microseconds.  Ray keeps what it is good at:
placing the workers, starting and killing them, noticing a dead one, and the rare
calls (start, spaces, pool shipping, ``env_method``/``get_attr``/``set_attr``, close).

The protocol is deliberately tiny.  Every message is one frame::

    u32 payload length | u8 kind | u32 sequence number | payload

little-endian.  The trainer sends a request, the worker answers it with the same kind
and sequence number (or :data:`ERROR`); there is at most one request in flight per
connection.  The sequence number is checked on every reply: a reply that does not
answer the request just sent is a protocol error, and the worker is treated as lost
— nothing from an earlier request can be taken for the current one.  (A replaced
worker also gets a fresh actor, a fresh listening socket and a fresh connection, so a
late reply of the old one has no way in.)

* :data:`AUTH` — the first frame of a connection, payload = the random token the
  trainer gave the actor at construction (through Ray).  A wrong token, another first
  frame, or an oversized one: the worker closes the connection without a word and
  never unpickles anything from it.  (The token travels in clear, like Ray's own
  traffic: it keeps strangers on the network from driving a worker, it is not
  encryption.)
* :data:`STEP` — payload: the worker's slice of the actions, raw float32
  (``k × action_dim``).  Reply: obs float32 (``k × obs_dim``) | rewards float32 (``k``)
  | terminated u8 (``k``) | truncated u8 (``k``) | pickled list of the ``k`` info dicts.
  The trainer knows ``k`` and the shapes, so the arrays need no header and decode as
  :func:`numpy.frombuffer` views of the received buffer (a fresh buffer per frame, so
  a view may be kept, e.g. as ``terminal_observation``).
* :data:`RESET_SOME` — payload: pickled ``{local env index: next opponent spec}``;
  reply: pickled ``{local env index: (obs, info)}`` (rare: only when episodes end).
"""

from __future__ import annotations

import pickle
import socket
import struct
import time
from typing import Any

import numpy as np

HEADER = struct.Struct("<IBI")
AUTH, STEP, RESET_SOME, ERROR = 1, 2, 3, 255
#: an AUTH frame is a token, nothing more: a stranger cannot make the worker allocate
MAX_AUTH_BYTES = 256
#: a trusted peer's frames (a step of a few KB; a reset with its infos) stay far below
MAX_FRAME_BYTES = 1 << 30
SEQ_MOD = 1 << 32


class ChannelError(ConnectionError):
    """The connection is unusable: closed, reset, timed out, or a protocol violation."""


def tune(sock: socket.socket) -> None:
    """No Nagle delay (a step is one small write answered by one small write), and TCP
    keepalive probes so that a peer whose machine vanished (no FIN, no RST) is noticed
    even by a side that waits without a deadline."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for opt, val in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, opt):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), val)


class Channel:
    """Framed messages over a connected TCP socket (either side)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = False
        self._hint = 0  # payload bytes of the last frame received: the next read's guess

    def send(self, kind: int, seq: int, *parts: Any) -> None:
        """One frame; ``parts`` are bytes-like (numpy arrays included), joined into one
        write: a step's payload is a few KB, cheaper to copy once than to send in pieces."""
        body = b"".join(parts)
        self.sock.sendall(HEADER.pack(len(body), kind, seq) + body)

    def recv(self, deadline: float | None = None, max_len: int = MAX_FRAME_BYTES
             ) -> tuple[int, int, memoryview]:
        """``(kind, seq, payload)`` of the next frame; ``deadline`` (``time.monotonic``)
        bounds the whole frame.  Raises :class:`ChannelError`.

        The payload is a view of a buffer of its own (never reused), so arrays viewing it
        may be kept.  The first read asks for as many bytes as the previous frame had:
        a step reply then arrives in one system call instead of two (header, body)."""
        hint = self._hint if max_len >= self._hint else 0
        buf = bytearray(HEADER.size + hint)
        got = self._fill(memoryview(buf), 0, HEADER.size, deadline)
        n, kind, seq = HEADER.unpack_from(buf)
        if n > max_len:
            raise ChannelError(f"frame of {n} bytes (at most {max_len})")
        total = HEADER.size + n
        if got > total:  # cannot happen with one request in flight; refuse rather than guess
            raise ChannelError("more bytes than one frame: the peer does not follow the protocol")
        if total > len(buf):
            buf.extend(bytes(total - len(buf)))
        view = memoryview(buf)[:total]
        self._fill(view, got, total, deadline)
        self._hint = n
        return kind, seq, view[HEADER.size:]

    def _fill(self, view: memoryview, got: int, need: int, deadline: float | None) -> int:
        """Read into ``view[got:]`` until at least ``need`` bytes are in; returns the count
        (at most ``len(view)``)."""
        sock = self.sock
        try:
            while got < need:
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ChannelError("no answer within the step timeout")
                    sock.settimeout(left)
                k = sock.recv_into(view[got:])
                if k == 0:
                    raise ChannelError("connection closed by the peer")
                got += k
        except TimeoutError:
            raise ChannelError("no answer within the step timeout") from None
        except ChannelError:
            raise
        except OSError as e:
            raise ChannelError(f"{type(e).__name__}: {e}") from None
        return got

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


# ------------------------------------------------------------------ step payloads
def encode_step(obs: np.ndarray, rews: np.ndarray, terms: np.ndarray, truncs: np.ndarray,
                infos: list[dict[str, Any]]) -> list[Any]:
    """The parts of a STEP reply (see the module docstring)."""
    return [np.ascontiguousarray(obs, np.float32), np.ascontiguousarray(rews, np.float32),
            np.ascontiguousarray(terms, np.uint8), np.ascontiguousarray(truncs, np.uint8),
            pickle.dumps(infos, protocol=pickle.HIGHEST_PROTOCOL)]


def decode_step(payload: memoryview, k: int, obs_shape: tuple[int, ...], obs_size: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
    """A STEP reply of ``k`` envs (observations of ``obs_shape``, ``obs_size`` floats
    each) as arrays viewing ``payload`` (no copy) + the infos."""
    n_obs = k * obs_size
    obs = np.frombuffer(payload, np.float32, n_obs).reshape(k, *obs_shape)
    off = 4 * n_obs
    rews = np.frombuffer(payload, np.float32, k, off)
    off += 4 * k
    terms = np.frombuffer(payload, np.bool_, k, off)
    truncs = np.frombuffer(payload, np.bool_, k, off + k)
    infos = pickle.loads(payload[off + 2 * k:])
    if len(infos) != k:
        raise ChannelError(f"step reply with {len(infos)} infos for {k} envs")
    return obs, rews, terms, truncs, infos
