"""The wire layout, declared once: ctypes mirrors of ``native/include/brawlpit.h``.

The header is the source of truth (``docs/protocol.md`` documents it); this
module mirrors its packed structs field for field and asserts their sizes at
import time, so a layout drift fails the moment anything imports it instead of
training on garbage.  ``tests/test_protocol.py`` also compiles a C program that
prints every size and field offset and compares them with these mirrors.

Everything else about the layout is *derived* from the mirrors: the ``struct``
formats of the per-step fast path (``struct`` unpacking is ~10x cheaper than
``ctypes.from_buffer_copy``) and every packet packer below.  The env, the parity
tool, the benchmarks and the tests all pack and parse through this module.

Everything on the wire is little-endian; ``ctypes.LittleEndianStructure`` makes
that explicit rather than relying on the host.
"""

from __future__ import annotations

import ctypes
import math
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

from brawlkit.wire.constants import C
from brawlkit.wire.mirrors import mirror

_LE = ctypes.LittleEndianStructure


@mirror("NetHeader")
class NetHeader(_LE):
    """The 12 bytes every datagram starts with: magic, version, type, seq, tick."""


@mirror("UserCmd")
class UserCmd(_LE):
    """A client's command: stick, buttons, the tick it starts at and how many it covers."""


@mirror("NetPlayer")
class NetPlayer(_LE):
    """One fighter as a SNAPSHOT carries it (what the observation is built from)."""


@mirror("MatchState")
class MatchState(_LE):
    """The match part of a SNAPSHOT: id, clock, phase, winner, mode, acked command."""


@mirror("SnapshotPacket")
class SnapshotPacket(_LE):
    """A whole SNAPSHOT datagram: header, match state, both fighters."""


@mirror("NetHello")
class NetHello(_LE):
    """HELLO: the slot wanted, which arena (create, join, any) and its settings."""


@mirror("NetWelcome")
class NetWelcome(_LE):
    """WELCOME: the session token, slot, arena and match the server gave."""


@mirror("NetBye")
class NetBye(_LE):
    """BYE: leave the arena."""


@mirror("NetReset")
class NetReset(_LE):
    """RESET: a fresh match in the sender's arena (a repeated nonce is applied once)."""


@mirror("NetError")
class NetError(_LE):
    """ERROR: a code and a NUL-padded text."""


@mirror("NetIdent")
class NetIdent(_LE):
    """IDENT: a client's name and its player ticket."""


@mirror("NetPeer")
class NetPeer(_LE):
    """PEER: who holds a slot of the arena (kind, name, ticket)."""


@mirror("NetBatch")
class NetBatch(_LE):
    """BATCH / BATCH_SNAP payload head: the item count and the echoed batch_seq."""


@mirror("NetBatchItem")
class NetBatchItem(_LE):
    """One BATCH item's seat (arena, slot) and the client's tag, before its datagram."""


# Sizes fixed by the protocol (docs/protocol.md) and by the header's payload table.
EXPECTED_SIZES: dict[type[ctypes.Structure], int] = {
    NetHeader: 12,
    UserCmd: 28,
    NetPlayer: 32,
    MatchState: 16,
    SnapshotPacket: 92,
    NetHello: 20,
    NetWelcome: 28,
    NetBye: 4,
    NetReset: 16,
    NetError: 40,
    NetIdent: 228,
    NetPeer: 232,
    NetBatch: 8,
    NetBatchItem: 8,
}
for _cls, _size in EXPECTED_SIZES.items():
    assert ctypes.sizeof(_cls) == _size, (
        f"brawlkit.wire.protocol.{_cls.__name__} is {ctypes.sizeof(_cls)} bytes, the wire "
        f"needs {_size}: the ctypes mirror drifted from native/include/brawlpit.h"
    )

HEADER_SIZE = ctypes.sizeof(NetHeader)
SNAPSHOT_SIZE = ctypes.sizeof(SnapshotPacket)

#: payload struct of each packet type (SNAPSHOT's payload is MatchState + NetPlayer[2])
PAYLOADS: dict[int, type[ctypes.Structure]] = {
    C.BP_PKT_HELLO: NetHello,
    C.BP_PKT_WELCOME: NetWelcome,
    C.BP_PKT_CMD: UserCmd,
    C.BP_PKT_BYE: NetBye,
    C.BP_PKT_RESET: NetReset,
    C.BP_PKT_ERROR: NetError,
    C.BP_PKT_IDENT: NetIdent,
    C.BP_PKT_PEER: NetPeer,
}

#: total datagram length of each packet type (header + payload)
PACKET_SIZES: dict[int, int] = {
    **{t: HEADER_SIZE + ctypes.sizeof(cls) for t, cls in PAYLOADS.items()},
    C.BP_PKT_SNAPSHOT: SNAPSHOT_SIZE,
}


class ProtocolError(ValueError):
    """A datagram that is not a well-formed packet of the expected kind."""


# ----------------------------------------------------------------- struct formats
_CODES: dict[Any, str] = {
    ctypes.c_uint8: "B", ctypes.c_int8: "b", ctypes.c_uint16: "H", ctypes.c_int16: "h",
    ctypes.c_uint32: "I", ctypes.c_int32: "i", ctypes.c_float: "f", ctypes.c_char: "c",
}


def struct_format(cls: Any) -> str:
    """The ``struct`` format (no byte-order prefix) of a packed ctypes mirror.

    Nested structs are flattened field by field; a ``c_char`` array becomes one
    ``Ns`` item, any other array its element repeated (so ``NetPlayer * 2``
    unpacks to the two players' fields in a row).
    """
    if isinstance(cls, type) and issubclass(cls, ctypes.Array):
        elem: Any = getattr(cls, "_type_")  # noqa: B009 - set by ctypes at class creation
        length: int = getattr(cls, "_length_")  # noqa: B009
        if elem is ctypes.c_char:
            return f"{length}s"
        return struct_format(elem) * length
    if isinstance(cls, type) and issubclass(cls, ctypes.Structure):
        return "".join(struct_format(t) for _, t, *_ in cls._fields_)
    return _CODES[cls]


def _struct(*parts: Any) -> struct.Struct:
    return struct.Struct("<" + "".join(struct_format(p) for p in parts))


_SNAP = _struct(SnapshotPacket)
_CMD = _struct(NetHeader, UserCmd)
_HELLO = _struct(NetHeader, NetHello)
_RESET = _struct(NetHeader, NetReset)
_BYE = _struct(NetHeader, NetBye)
_IDENT = _struct(NetHeader, NetIdent)
_PEER = _struct(NetHeader, NetPeer)
_MATCH_PLAYERS = _struct(MatchState, NetPlayer, NetPlayer)
for _s, _t in ((_CMD, C.BP_PKT_CMD), (_HELLO, C.BP_PKT_HELLO), (_RESET, C.BP_PKT_RESET),
               (_BYE, C.BP_PKT_BYE), (_IDENT, C.BP_PKT_IDENT), (_PEER, C.BP_PKT_PEER)):
    assert _s.size == PACKET_SIZES[_t]
assert _SNAP.size == SNAPSHOT_SIZE == HEADER_SIZE + _MATCH_PLAYERS.size
_N_PLAYER = len(NetPlayer._fields_)
_PLAYER_FLOATS = [i for i, (_, t, *_) in enumerate(NetPlayer._fields_) if t is ctypes.c_float]


# ----------------------------------------------------------------- validation
def validate_datagram(data: bytes) -> NetHeader:
    """The header of a well-formed datagram: magic, version, known type, exact length.

    Raises :class:`ProtocolError` naming what is wrong (the same rules the
    server applies before counting a drop, docs/protocol.md "Validation").
    """
    if len(data) < HEADER_SIZE:
        raise ProtocolError(f"datagram of {len(data)} bytes is shorter than a header")
    hdr = NetHeader.from_buffer_copy(data, 0)
    if hdr.magic != C.BP_MAGIC:
        raise ProtocolError(f"bad magic 0x{hdr.magic:04X}")
    if hdr.version != C.BP_PROTO_VERSION:
        raise ProtocolError(f"protocol version {hdr.version}, expected {C.BP_PROTO_VERSION}")
    want = PACKET_SIZES.get(hdr.type)
    if want is None:
        raise ProtocolError(f"unknown packet type {hdr.type}")
    if len(data) != want:
        raise ProtocolError(f"packet type {hdr.type} of {len(data)} bytes, expected {want}")
    return hdr


_P = TypeVar("_P", bound=ctypes.Structure)


def parse_payload(data: bytes, cls: type[_P]) -> _P:
    """The payload after the header as ``cls`` (validate the datagram first)."""
    return cls.from_buffer_copy(data, HEADER_SIZE)


# ----------------------------------------------------------------- snapshots
class PlayerState(NamedTuple):
    """One decoded ``NetPlayer`` (a NamedTuple: cheapest to build per step)."""

    x: float
    y: float
    vx: float
    vy: float
    damage: float
    shield: float
    stocks: int
    facing: int
    flags: int
    action_state: int
    hitstun_ticks: int
    jumps_left: int
    slot: int

    @property
    def on_ground(self) -> bool:
        return bool(self.flags & C.BP_PLAYER_FLAG_ON_GROUND)

    @property
    def offstage(self) -> bool:
        return bool(self.flags & C.BP_PLAYER_FLAG_OFFSTAGE)

    @property
    def shielding(self) -> bool:
        return bool(self.flags & C.BP_PLAYER_FLAG_SHIELDING)


assert PlayerState._fields == tuple(n for n, *_ in NetPlayer._fields_)


class Snapshot(NamedTuple):
    """A decoded SNAPSHOT datagram; ``raw`` keeps the exact wire bytes."""

    seq: int
    tick: int
    match_id: int
    ticks_left: int
    phase: int
    winner: int
    n_players: int
    mode: int
    ack_cmd_seq: int
    players: tuple[PlayerState, PlayerState]
    raw: bytes

    @property
    def over(self) -> bool:
        return self.phase == C.BP_PHASE_OVER


_P0 = len(NetHeader._fields_) + len(MatchState._fields_)  # first player field in the unpacked tuple
_FLOAT_IDX = [_P0 + i for i in _PLAYER_FLOATS] + [_P0 + _N_PLAYER + i for i in _PLAYER_FLOATS]


def parse_snapshot(data: bytes) -> Snapshot:
    """Decode a SNAPSHOT datagram (validated, every float finite) into a :class:`Snapshot`."""
    if len(data) != SNAPSHOT_SIZE:
        validate_datagram(data)  # raises with the precise reason
        raise ProtocolError(f"expected SNAPSHOT of {SNAPSHOT_SIZE} bytes, got {len(data)}")
    v = _SNAP.unpack(data)
    if v[0] != C.BP_MAGIC or v[1] != C.BP_PROTO_VERSION or v[2] != C.BP_PKT_SNAPSHOT:
        validate_datagram(data)
        raise ProtocolError(f"expected SNAPSHOT, got packet type {v[2]}")
    for i in _FLOAT_IDX:
        if not math.isfinite(v[i]):
            raise ProtocolError("non-finite float in snapshot")
    return Snapshot(
        v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
        (PlayerState(*v[_P0:_P0 + _N_PLAYER]), PlayerState(*v[_P0 + _N_PLAYER:_P0 + 2 * _N_PLAYER])),
        data,
    )


def snapshot_from_checked(data: bytes) -> Snapshot:
    """:func:`parse_snapshot` without its checks, for SNAPSHOT bytes C has already
    validated the same way (length, magic, version, type, every float finite): the vec
    env's fast lane, whose ``bpv_ready`` accepts a datagram only after those checks."""
    v = _SNAP.unpack(data)
    return Snapshot(
        v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
        (PlayerState(*v[_P0:_P0 + _N_PLAYER]), PlayerState(*v[_P0 + _N_PLAYER:_P0 + 2 * _N_PLAYER])),
        data,
    )


def snapshot_or_none(data: bytes) -> Snapshot | None:
    """:func:`parse_snapshot`, or None for anything that is not a valid SNAPSHOT."""
    if len(data) != SNAPSHOT_SIZE:
        return None
    try:
        return parse_snapshot(data)
    except ProtocolError:
        return None


# ----------------------------------------------------------------- packers
def _hdr(ptype: int, seq: int, tick: int = 0) -> tuple[int, int, int, int, int]:
    return C.BP_MAGIC, C.BP_PROTO_VERSION, ptype, seq & 0xFFFFFFFF, tick & 0xFFFFFFFF


def make_header(ptype: int, seq: int, tick: int = 0) -> NetHeader:
    """A ``NetHeader`` of this protocol version (for building ctypes packets)."""
    return NetHeader(*_hdr(ptype, seq, tick))


def pack_hello(seq: int, want_slot: int, nonce: int, *, arena_op: int = C.BP_ARENA_CREATE,
               arena_id: int = 0, mode: int = C.BP_MODE_DEFAULT, cpu_level: int = C.BP_CPU_KEEP,
               seed: int = 0, speed: float = 0.0) -> bytes:
    """HELLO: take ``want_slot`` (0, 1 or ``BP_SLOT_ANY``) of an arena — a new one
    (``BP_ARENA_CREATE``, configured by mode / cpu_level / seed / speed; the
    ``*_DEFAULT`` / ``BP_CPU_KEEP`` / 0 values take the server's defaults), the arena
    ``arena_id`` (``BP_ARENA_JOIN``), or any with that slot free (``BP_ARENA_ANY``).
    The nonce comes back in WELCOME."""
    return _HELLO.pack(*_hdr(C.BP_PKT_HELLO, seq), want_slot, arena_op, mode, cpu_level,
                       nonce & 0xFFFFFFFF, arena_id & 0xFFFFFFFF, seed & 0xFFFFFFFF, speed)


def pack_reset(seq: int, session: int, seed: int, cpu_level: int, nonce: int) -> bytes:
    """RESET: a fresh match in the sender's arena with ``seed``; ``cpu_level`` 1..8,
    ``BP_CPU_NONE`` or ``BP_CPU_KEEP``.  Re-sending the same ``nonce`` is a safe retry:
    the server applies a nonce once and answers a repeat with the current snapshot."""
    return _RESET.pack(*_hdr(C.BP_PKT_RESET, seq), session, seed & 0xFFFFFFFF,
                       nonce & 0xFFFFFFFF, cpu_level, 0, 0, 0)


def pack_bye(seq: int, session: int) -> bytes:
    """BYE: leave the slot."""
    return _BYE.pack(*_hdr(C.BP_PKT_BYE, seq), session)


def pack_cmd(
    seq: int, session: int, tick: int, cmd_seq: int, stick_x: float, stick_y: float,
    buttons: int, slot: int, repeat: int,
) -> bytes:
    """CMD (header + UserCmd) covering ticks [tick, tick + repeat); ``tick`` is also the header's."""
    return _CMD.pack(
        *_hdr(C.BP_PKT_CMD, seq, tick), session, tick & 0xFFFFFFFF, cmd_seq & 0xFFFFFFFF,
        stick_x, stick_y, buttons, slot, repeat, 0,
    )


def pack_snapshot(
    players: Sequence[Sequence[Any]], *, match_id: int = 1, ticks_left: int = 0,
    phase: int = C.BP_PHASE_PLAYING, winner: int = C.BP_WINNER_NONE, n_players: int = 2,
    mode: int = C.BP_MODE_LOCKSTEP, ack_cmd_seq: int = 0, seq: int = 0, tick: int = 0,
) -> bytes:
    """A SNAPSHOT datagram as the server would send it (tools and tests build states with it).

    ``players`` are two sequences of ``NetPlayer`` field values in field order
    (a :class:`PlayerState` is one); floats round to float32 on packing.
    """
    if len(players) != 2:
        raise ValueError("a snapshot carries exactly two players")
    return _SNAP.pack(*_hdr(C.BP_PKT_SNAPSHOT, seq, tick), match_id, ticks_left & 0xFFFFFFFF,
                      phase, winner, n_players, mode, ack_cmd_seq, *players[0], *players[1])


def _text_field(value: str, field: str, size: int, *, allow_empty: bool) -> bytes:
    """``value`` as a NUL-padded field of ``size`` bytes: printable ASCII (0x20..0x7e),
    at most ``size - 1`` characters (the server requires a terminating NUL)."""
    if not value and not allow_empty:
        raise ValueError(f"{field} must not be empty")
    if len(value) > size - 1:
        raise ValueError(f"{field} has {len(value)} characters, at most {size - 1} allowed")
    bad = [ch for ch in value if not " " <= ch <= "~"]
    if bad:
        raise ValueError(f"{field} has a character outside printable ASCII: {bad[0]!r}")
    return value.encode("ascii")


def pack_ident(seq: int, session: int, name: str, ticket: str = "") -> bytes:
    """IDENT: name (non-empty) and registry ticket (empty = anonymous) of the player
    in the sender's slot.  Raises ValueError naming the bad field (``name`` or
    ``ticket``): the server would drop it (``bad_ident``) and answer ERROR BAD_REQUEST.
    Re-send it until a PEER of the own slot shows the name (the server answers an
    IDENT that changes nothing with both PEERs to the sender)."""
    n = _text_field(name, "name", int(C.BP_NAME_LEN), allow_empty=False)
    t = _text_field(ticket, "ticket", int(C.BP_TICKET_LEN), allow_empty=True)
    return _IDENT.pack(*_hdr(C.BP_PKT_IDENT, seq), session & 0xFFFFFFFF, n, t)


class Peer(NamedTuple):
    """A decoded PEER: who holds ``slot`` of ``arena_id`` (kind ``BP_PEER_*``;
    the CPU is named ``cpu:L``; an empty slot has kind EMPTY and name "")."""

    arena_id: int
    slot: int
    kind: int
    name: str
    ticket: str


def parse_peer(data: bytes) -> Peer:
    """Decode a PEER datagram (header, exact size, slot, kind, printable text) or raise
    :class:`ProtocolError`."""
    hdr = validate_datagram(data)
    if hdr.type != C.BP_PKT_PEER:
        raise ProtocolError(f"expected PEER, got packet type {hdr.type}")
    v = _PEER.unpack(data)
    arena_id, slot, kind, _, name_b, ticket_b = v[5:]
    if slot not in (0, 1):
        raise ProtocolError(f"PEER for slot {slot}")
    if kind not in (C.BP_PEER_EMPTY, C.BP_PEER_CLIENT, C.BP_PEER_CPU):
        raise ProtocolError(f"PEER of unknown kind {kind}")
    texts = []
    for field, raw in (("name", name_b), ("ticket", ticket_b)):
        text, _, pad = raw.partition(b"\0")
        if pad.strip(b"\0") or any(not 0x20 <= ch <= 0x7E for ch in text):
            raise ProtocolError(f"PEER {field} is not NUL-padded printable ASCII")
        texts.append(text.decode("ascii"))
    return Peer(arena_id, slot, kind, texts[0], texts[1])


def peer_or_none(data: bytes) -> Peer | None:
    """:func:`parse_peer`, or None for anything that is not a valid PEER."""
    if len(data) != PACKET_SIZES[C.BP_PKT_PEER]:
        return None
    try:
        return parse_peer(data)
    except ProtocolError:
        return None


# ----------------------------------------------------------------- batches
_BATCH_HEAD = _struct(NetHeader, NetBatch)
_BATCH_ITEM = _struct(NetBatchItem)
BATCH_HEAD_SIZE = _BATCH_HEAD.size
BATCH_ITEM_SIZE = _BATCH_ITEM.size + PACKET_SIZES[C.BP_PKT_CMD]
BATCH_SNAP_ITEM_SIZE = _BATCH_ITEM.size + SNAPSHOT_SIZE


class BatchItem(NamedTuple):
    """One item of a BATCH (``datagram``: the seat's CMD) or of a BATCH_SNAP (the
    SNAPSHOT that seat got): the seat and the tag its client chose."""

    arena_id: int
    tag: int
    slot: int
    datagram: bytes


def pack_batch(seq: int, batch_seq: int, items: Sequence[BatchItem]) -> bytes:
    """BATCH: up to ``BP_BATCH_MAX`` CMD datagrams of seated clients (each as its client
    would send it, :func:`pack_cmd`) in one datagram (docs/protocol.md "Batches")."""
    if not 1 <= len(items) <= C.BP_BATCH_MAX:
        raise ValueError(f"a BATCH holds 1..{C.BP_BATCH_MAX} items, got {len(items)}")
    out = [_BATCH_HEAD.pack(*_hdr(C.BP_PKT_BATCH, seq), len(items), 0, batch_seq & 0xFFFFFFFF)]
    for it in items:
        if len(it.datagram) != PACKET_SIZES[C.BP_PKT_CMD]:
            raise ValueError(f"a BATCH item carries one CMD datagram ({PACKET_SIZES[C.BP_PKT_CMD]} "
                             f"bytes), got {len(it.datagram)}")
        out += [_BATCH_ITEM.pack(it.arena_id, it.tag, it.slot, 0), it.datagram]
    return b"".join(out)


def parse_batch_snap(data: bytes) -> tuple[int, list[BatchItem]]:
    """``(batch_seq, items)`` of a BATCH_SNAP — header, count and exact length checked,
    each item's SNAPSHOT validated (:func:`parse_snapshot`) — or :class:`ProtocolError`."""
    if len(data) < BATCH_HEAD_SIZE:
        raise ProtocolError(f"BATCH_SNAP of {len(data)} bytes is shorter than its head")
    magic, version, ptype, _, _, count, _, batch_seq = _BATCH_HEAD.unpack_from(data)
    if magic != C.BP_MAGIC or version != C.BP_PROTO_VERSION or ptype != C.BP_PKT_BATCH_SNAP:
        raise ProtocolError(f"not a BATCH_SNAP (magic 0x{magic:04X}, version {version}, type {ptype})")
    if count > C.BP_BATCH_MAX or len(data) != BATCH_HEAD_SIZE + count * BATCH_SNAP_ITEM_SIZE:
        raise ProtocolError(f"BATCH_SNAP of {count} items must be "
                            f"{BATCH_HEAD_SIZE + count * BATCH_SNAP_ITEM_SIZE} bytes, got {len(data)}")
    items = []
    for k in range(count):
        off = BATCH_HEAD_SIZE + k * BATCH_SNAP_ITEM_SIZE
        arena_id, tag, slot, _ = _BATCH_ITEM.unpack_from(data, off)
        snap = data[off + _BATCH_ITEM.size:off + BATCH_SNAP_ITEM_SIZE]
        parse_snapshot(snap)
        items.append(BatchItem(arena_id, tag, slot, snap))
    return batch_seq, items


def struct_layout(cls: type[ctypes.Structure]) -> list[tuple[str, int, int]]:
    """(field, offset, size) for each field: what the C offset test compares."""
    out = []
    for name, *_ in cls._fields_:
        desc = getattr(cls, name)
        out.append((name, desc.offset, desc.size))
    return out
