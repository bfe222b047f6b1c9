"""The human client's network side: one non-blocking UDP session with ``brawlpit_server``.

Why a class of its own, apart from the window: the loop that draws must never wait
for the network (a lost datagram would freeze the picture), and the same session
logic — HELLO until WELCOME, IDENT until the server echoes our name, RESET until the
new match shows, BYE on exit — is what any other interactive tool (a spectator
dashboard, a test) needs without pygame.  :meth:`PlayClient.poll` does all the
retrying from a clock it is given, so it is driven by the caller's frame loop and
tested without sleeping.

The session speaks only through ``brawlkit.wire.protocol``'s packers and parsers
(docs/protocol.md): a player joins with HELLO ``arena_op`` ANY (or CREATE against
the built-in CPU) in realtime mode; a spectator joins an arena with ``want_slot``
``BP_SLOT_SPECTATE`` and sends no commands.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from brawlkit.env.udp_client import UdpClient
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C

#: re-send a HELLO / IDENT / RESET that got no answer after this long (s)
RETRY_S = 0.25
#: a seated spectator re-sends HELLO this often, so the server does not time it out
KEEPALIVE_S = 5.0
#: IDENTs sent (every 2 x RETRY_S) before giving up on a server that never echoes the name
IDENT_TRIES = 20
#: no datagram from the server for this long after WELCOME = "connection lost"
SILENCE_S = 3.0


class PlayError(RuntimeError):
    """A session that cannot go on (the server refused the HELLO, a bad argument)."""


@dataclass
class PeerInfo:
    """Who occupies a slot, as the server's PEER packets say (kind ``BP_PEER_*``)."""

    kind: int = 0
    name: str = ""
    ticket: str = ""


@dataclass
class Counters:
    """What the session did; printed as one JSON line when the client exits."""

    hellos: int = 0
    welcomes: int = 0
    idents: int = 0
    peers: int = 0
    cmds: int = 0
    snapshots: int = 0
    stale_snapshots: int = 0
    resets: int = 0
    errors: int = 0
    bad_datagrams: int = 0


@dataclass
class PlayClient:
    """One player's (or spectator's) session.  Nothing here blocks.

    ``cpu_level``: None = join any realtime arena with a free slot (ANY) using the
    server's CPU default for one it creates, 0 = the same but never a CPU, 1..8 =
    create an arena of our own against the built-in CPU.  ``spectate``: an arena id
    to watch (no slot, no commands).
    """

    address: tuple[str, int]
    name: str = "anonymous"
    ticket: str = ""
    cpu_level: int | None = None
    spectate: int | None = None
    seed: int = 0
    counters: Counters = field(default_factory=Counters)

    def __post_init__(self) -> None:
        self._rng = random.Random()
        self._start()

    def _start(self) -> None:
        """A fresh session: a new socket (so no datagram of an old session can reach it)
        and a new HELLO nonce."""
        self.udp = UdpClient(self.address, poll_us=0)
        self.nonce = self._rng.getrandbits(32)
        self.session = 0
        self.slot: int | None = None       # 0/1, or None before WELCOME and for a spectator
        self.arena_id = 0
        self.welcomed = False
        self.error: str | None = None      # a refusal before WELCOME (fatal) or the last ERROR
        self.fatal = False
        self.ended = False                 # a spectator's arena closed
        self.error_at = 0.0
        self.snapshot: P.Snapshot | None = None
        self.peers: dict[int, PeerInfo] = {}
        self.ident_confirmed = False
        self.last_rx = 0.0
        self._next_hello = 0.0
        self._next_ident = 0.0
        self._idents_sent = 0
        self._reset_nonce: int | None = None
        self._reset_from_match = 0
        self._next_reset = 0.0
        self._stick = (0.0, 0.0)
        self._buttons = 0

    # ---------------------------------------------------------------- state
    @property
    def spectating(self) -> bool:
        return self.spectate is not None

    @property
    def phase(self) -> int | None:
        return None if self.snapshot is None else self.snapshot.phase

    @property
    def resetting(self) -> bool:
        """A RESET we asked for has not shown up as a new match yet."""
        return self._reset_nonce is not None

    def opponent_slot(self) -> int:
        return 1 if self.slot == 0 else 0

    # ---------------------------------------------------------------- sending
    def _hello(self) -> bytes:
        seq = self.udp.next_seq()
        if self.spectating:
            return P.pack_hello(seq, C.BP_SLOT_SPECTATE, self.nonce, arena_op=C.BP_ARENA_JOIN,
                                arena_id=int(self.spectate or 0))
        if self.cpu_level:  # 1..8: an arena of our own against the built-in CPU, slot 0
            return P.pack_hello(seq, 0, self.nonce, arena_op=C.BP_ARENA_CREATE,
                                mode=C.BP_MODE_REALTIME, cpu_level=self.cpu_level, seed=self.seed)
        level = C.BP_CPU_KEEP if self.cpu_level is None else C.BP_CPU_NONE
        return P.pack_hello(seq, C.BP_SLOT_ANY, self.nonce, arena_op=C.BP_ARENA_ANY,
                            mode=C.BP_MODE_REALTIME, cpu_level=level, seed=self.seed)

    def _send(self, data: bytes) -> None:
        self.udp.send(data)

    def set_input(self, stick_x: float, stick_y: float, buttons: int) -> None:
        """The controller state to send with the next :meth:`poll`."""
        self._stick = (max(-1.0, min(1.0, stick_x)), max(-1.0, min(1.0, stick_y)))
        self._buttons = buttons & C.BP_BTN_MASK

    def request_reset(self, now: float | None = None) -> bool:
        """Ask for a new match (R on the result screen); False when not possible now.

        The RESET carries a fresh nonce and is re-sent with that same nonce until a
        snapshot of a newer match arrives (a retry never starts a second match)."""
        if self.spectating or not self.welcomed or self.resetting or self.snapshot is None:
            return False
        self._reset_nonce = self._rng.getrandbits(32)
        self._reset_from_match = self.snapshot.match_id
        self._next_reset = 0.0
        self.counters.resets += 1
        self._maybe_reset(time.monotonic() if now is None else now)
        return True

    def opponent_present(self) -> bool:
        """Is the other slot occupied?  (True when no PEER has said otherwise.)"""
        peer = self.peers.get(self.opponent_slot())
        return peer is None or peer.kind != C.BP_PEER_EMPTY

    def rejoin(self) -> bool:
        """Leave this arena (BYE) and look for another with a fresh HELLO ANY — what
        "play again" means when the opponent left (a bot pool's bot plays one match
        per arena, then the next bot waits in an arena of its own)."""
        if self.spectating or not self.welcomed:
            return False
        self.close()
        self._start()
        return True

    def _maybe_reset(self, now: float) -> None:
        if self._reset_nonce is None or now < self._next_reset:
            return
        seed = self._rng.randrange(1, 1 << 31)
        self._send(P.pack_reset(self.udp.next_seq(), self.session, seed, C.BP_CPU_KEEP,
                                self._reset_nonce))
        self._next_reset = now + RETRY_S

    def _send_cmd(self) -> None:
        tick = self.snapshot.tick if self.snapshot is not None else 0
        self.udp.cmd_seq += 1
        sx, sy = self._stick
        self._send(P.pack_cmd(self.udp.next_seq(), self.session, tick, self.udp.cmd_seq,
                              sx, sy, self._buttons, int(self.slot or 0), 1))
        self.counters.cmds += 1

    def _send_ident(self) -> None:
        self._send(P.pack_ident(self.udp.next_seq(), self.session, self.name, self.ticket))
        self.counters.idents += 1
        self._idents_sent += 1

    # ---------------------------------------------------------------- receiving
    def _on_datagram(self, data: bytes, now: float) -> None:
        try:
            hdr = P.validate_datagram(data)
        except P.ProtocolError:
            self.counters.bad_datagrams += 1
            return
        self.last_rx = now
        if hdr.type == C.BP_PKT_SNAPSHOT:
            snap = P.snapshot_or_none(data)
            if snap is None:
                self.counters.bad_datagrams += 1
                return
            self.counters.snapshots += 1
            old = self.snapshot
            if old is not None and (snap.match_id, snap.tick) < (old.match_id, old.tick):
                self.counters.stale_snapshots += 1  # reordered: keep the newer one
                return
            self.snapshot = snap
            if self._reset_nonce is not None and snap.match_id != self._reset_from_match:
                self._reset_nonce = None
        elif hdr.type == C.BP_PKT_WELCOME:
            w = P.parse_payload(data, P.NetWelcome)
            if w.nonce != self.nonce:
                return
            if not self.welcomed:
                self.counters.welcomes += 1
            self.welcomed = True
            self.session, self.arena_id = w.session, w.arena_id
            self.slot = None if self.spectating else int(w.slot)
            self.error = None
        elif hdr.type == C.BP_PKT_PEER:
            self._on_peer(data)
        elif hdr.type == C.BP_PKT_ERROR:
            e = P.parse_payload(data, P.NetError)
            self.counters.errors += 1
            text = e.text.split(b"\0", 1)[0].decode("ascii", "replace")
            self.error = f"server refused: {text} (error {e.code})"
            self.error_at = now
            if not self.welcomed:
                self.fatal = True  # the HELLO was refused: nothing to retry
            elif self.spectating:
                self.ended = True  # the keep-alive HELLO found the arena gone
            else:
                self._reset_nonce = None  # a refused RESET: stop re-sending it

    def _on_peer(self, data: bytes) -> None:
        try:
            peer = P.parse_peer(data)
        except P.ProtocolError:
            self.counters.bad_datagrams += 1
            return
        if self.arena_id and peer.arena_id != self.arena_id:
            return
        self.counters.peers += 1
        self.peers[int(peer.slot)] = PeerInfo(int(peer.kind), str(peer.name), str(peer.ticket))
        if self.slot is not None and peer.slot == self.slot and peer.name == self.name:
            self.ident_confirmed = True

    # ---------------------------------------------------------------- the loop's one call
    def poll(self, now: float | None = None) -> None:
        """Drain the socket (keeping the freshest snapshot), then send what is due:
        HELLO until WELCOME, IDENT until our PEER shows our name, a pending RESET, and
        — for a player — one CMD (repeat 1, tick of the latest snapshot)."""
        now = time.monotonic() if now is None else now
        while (data := self.udp.recv_nowait()) is not None:
            self._on_datagram(data, now)
        if self.fatal or self.ended:
            return
        if not self.welcomed or (self.spectating and now >= self._next_hello):
            if now >= self._next_hello:
                self._send(self._hello())
                self.counters.hellos += 1
                self._next_hello = now + (KEEPALIVE_S if self.welcomed else RETRY_S)
            if not self.welcomed:
                return
        if not self.spectating:
            if (not self.ident_confirmed and now >= self._next_ident
                    and self._idents_sent < IDENT_TRIES):
                self._send_ident()
                self._next_ident = now + RETRY_S * 2
            self._maybe_reset(now)
            self._send_cmd()

    def silent_for(self, now: float | None = None) -> float:
        """Seconds since the last datagram from the server (0 before WELCOME)."""
        if not self.welcomed:
            return 0.0
        return (time.monotonic() if now is None else now) - self.last_rx

    def close(self) -> None:
        """BYE, once: a second one would be counted as a drop (the address holds no
        slot any more); a lost one holds the slot until the server's client timeout."""
        if self.welcomed and not self.fatal:
            self._send(P.pack_bye(self.udp.next_seq(), self.session))
        self.udp.close()


def parse_server(text: str) -> tuple[str, int]:
    """``HOST:PORT`` → (IPv4 address, port); raises :class:`PlayError` saying what is wrong."""
    import socket

    host, sep, port_s = text.rpartition(":")
    if not sep or not host:
        raise PlayError(f"--server {text!r}: expected HOST:PORT, e.g. 127.0.0.1:7777")
    try:
        port = int(port_s)
    except ValueError:
        raise PlayError(f"--server {text!r}: port {port_s!r} is not a number") from None
    if not 1 <= port <= 65535:
        raise PlayError(f"--server {text!r}: port {port} is outside 1..65535")
    try:
        addr = socket.gethostbyname(host)
    except OSError as e:
        raise PlayError(f"--server {text!r}: cannot resolve host {host!r} ({e})") from None
    return addr, port
