"""ctypes mirrors of the BRAWLPIT wire structs (``native/include/brawlpit.h``).

The header is the source of truth; this module mirrors its packed structs
field for field and asserts their sizes at import time, so a layout drift fails
the moment anything imports brawlkit.protocol instead of training on garbage.
``tests/test_protocol.py`` also compiles a C program that prints every size and
field offset and compares them with these mirrors.

Everything on the wire is little-endian; ``ctypes.LittleEndianStructure`` makes
that explicit rather than relying on the host.
"""

from __future__ import annotations

import ctypes
import math
import struct
from typing import NamedTuple, TypeVar

from brawlkit.constants import C

_LE = ctypes.LittleEndianStructure


class NetHeader(_LE):
    _pack_ = 1
    _fields_ = [
        ("magic", ctypes.c_uint16),
        ("version", ctypes.c_uint8),
        ("type", ctypes.c_uint8),
        ("seq", ctypes.c_uint32),
        ("tick", ctypes.c_uint32),
    ]


class UserCmd(_LE):
    _pack_ = 1
    _fields_ = [
        ("session", ctypes.c_uint32),
        ("tick", ctypes.c_uint32),
        ("cmd_seq", ctypes.c_uint32),
        ("stick_x", ctypes.c_float),
        ("stick_y", ctypes.c_float),
        ("buttons", ctypes.c_uint32),
        ("slot", ctypes.c_uint8),
        ("repeat", ctypes.c_uint8),
        ("reserved", ctypes.c_uint16),
    ]


class NetPlayer(_LE):
    _pack_ = 1
    _fields_ = [
        ("x", ctypes.c_float),
        ("y", ctypes.c_float),
        ("vx", ctypes.c_float),
        ("vy", ctypes.c_float),
        ("damage", ctypes.c_float),
        ("shield", ctypes.c_float),
        ("stocks", ctypes.c_uint8),
        ("facing", ctypes.c_int8),
        ("flags", ctypes.c_uint8),
        ("action_state", ctypes.c_uint8),
        ("hitstun_ticks", ctypes.c_uint16),
        ("jumps_left", ctypes.c_uint8),
        ("slot", ctypes.c_uint8),
    ]


class MatchState(_LE):
    _pack_ = 1
    _fields_ = [
        ("match_id", ctypes.c_uint32),
        ("ticks_left", ctypes.c_uint32),
        ("phase", ctypes.c_uint8),
        ("winner", ctypes.c_uint8),
        ("n_players", ctypes.c_uint8),
        ("mode", ctypes.c_uint8),
        ("ack_cmd_seq", ctypes.c_uint32),
    ]


class SnapshotPacket(_LE):
    _pack_ = 1
    _fields_ = [
        ("hdr", NetHeader),
        ("match", MatchState),
        ("players", NetPlayer * 2),
    ]


class NetHello(_LE):
    _pack_ = 1
    _fields_ = [
        ("want_slot", ctypes.c_uint8),
        ("reserved", ctypes.c_uint8 * 3),
        ("nonce", ctypes.c_uint32),
    ]


class NetWelcome(_LE):
    _pack_ = 1
    _fields_ = [
        ("session", ctypes.c_uint32),
        ("nonce", ctypes.c_uint32),
        ("match_id", ctypes.c_uint32),
        ("slot", ctypes.c_uint8),
        ("mode", ctypes.c_uint8),
        ("cpu_level", ctypes.c_uint8),
        ("stocks", ctypes.c_uint8),
        ("tick_hz", ctypes.c_uint16),
        ("reserved", ctypes.c_uint16),
        ("match_ticks", ctypes.c_uint32),
    ]


class NetBye(_LE):
    _pack_ = 1
    _fields_ = [("session", ctypes.c_uint32)]


class NetReset(_LE):
    _pack_ = 1
    _fields_ = [
        ("session", ctypes.c_uint32),
        ("seed", ctypes.c_uint32),
        ("cpu_level", ctypes.c_uint8),
        ("reserved", ctypes.c_uint8 * 3),
    ]


class NetError(_LE):
    _pack_ = 1
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("reserved", ctypes.c_uint16),
        ("text", ctypes.c_char * int(C.BP_ERROR_TEXT_LEN)),
    ]


# Sizes fixed by DESIGN.md §2 (normative) and by the header's payload table.
EXPECTED_SIZES: dict[type[ctypes.Structure], int] = {
    NetHeader: 12,
    UserCmd: 28,
    NetPlayer: 32,
    MatchState: 16,
    SnapshotPacket: 92,
    NetHello: 8,
    NetWelcome: 24,
    NetBye: 4,
    NetReset: 12,
    NetError: 40,
}
for _cls, _size in EXPECTED_SIZES.items():
    assert ctypes.sizeof(_cls) == _size, (
        f"brawlkit.protocol.{_cls.__name__} is {ctypes.sizeof(_cls)} bytes, the wire "
        f"needs {_size}: the ctypes mirror drifted from native/include/brawlpit.h"
    )

HEADER_SIZE = ctypes.sizeof(NetHeader)
SNAPSHOT_SIZE = ctypes.sizeof(SnapshotPacket)

#: total datagram length of each packet type (header + payload)
PACKET_SIZES: dict[int, int] = {
    C.BP_PKT_HELLO: HEADER_SIZE + ctypes.sizeof(NetHello),
    C.BP_PKT_WELCOME: HEADER_SIZE + ctypes.sizeof(NetWelcome),
    C.BP_PKT_CMD: HEADER_SIZE + ctypes.sizeof(UserCmd),
    C.BP_PKT_SNAPSHOT: SNAPSHOT_SIZE,
    C.BP_PKT_BYE: HEADER_SIZE + ctypes.sizeof(NetBye),
    C.BP_PKT_RESET: HEADER_SIZE + ctypes.sizeof(NetReset),
    C.BP_PKT_ERROR: HEADER_SIZE + ctypes.sizeof(NetError),
}


class ProtocolError(ValueError):
    """A datagram that is not a well-formed packet of the expected kind."""


def make_header(ptype: int, seq: int, tick: int = 0) -> NetHeader:
    return NetHeader(C.BP_MAGIC, C.BP_PROTO_VERSION, ptype, seq & 0xFFFFFFFF, tick & 0xFFFFFFFF)


_P = TypeVar("_P", bound=ctypes.Structure)


def pack(ptype: int, seq: int, payload: ctypes.Structure, tick: int = 0) -> bytes:
    """Header + payload as the bytes of one datagram."""
    return bytes(make_header(ptype, seq, tick)) + bytes(payload)


def parse_header(data: bytes) -> NetHeader:
    """Validate magic, version, type and exact length; raise ProtocolError otherwise."""
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


def parse_payload(data: bytes, cls: type[_P]) -> _P:
    return cls.from_buffer_copy(data, HEADER_SIZE)


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


# struct formats mirror the ctypes layouts above (checked in tests): struct
# unpacking is ~10x cheaper than ctypes.from_buffer_copy on the per-step path.
_SNAP = struct.Struct("<HBBI I IIBBBBI ffffffBbBBHBB ffffffBbBBHBB")
_CMD = struct.Struct("<HBBII IIIffIBBH")
assert _SNAP.size == 92 and _CMD.size == HEADER_SIZE + ctypes.sizeof(UserCmd)


def parse_snapshot(data: bytes) -> Snapshot:
    """Decode a SNAPSHOT datagram (validated) into a :class:`Snapshot`."""
    if len(data) != SNAPSHOT_SIZE:
        parse_header(data)  # raises with the precise reason
        raise ProtocolError(f"expected SNAPSHOT of {SNAPSHOT_SIZE} bytes, got {len(data)}")
    v = _SNAP.unpack(data)
    if v[0] != C.BP_MAGIC or v[1] != C.BP_PROTO_VERSION or v[2] != C.BP_PKT_SNAPSHOT:
        parse_header(data)
        raise ProtocolError(f"expected SNAPSHOT, got packet type {v[2]}")
    for f in v[12:18] + v[25:31]:
        if not math.isfinite(f):
            raise ProtocolError("non-finite float in snapshot")
    return Snapshot(
        v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11],
        (PlayerState(*v[12:25]), PlayerState(*v[25:38])), data,
    )


def pack_cmd(
    seq: int, session: int, tick: int, cmd_seq: int, stick_x: float, stick_y: float,
    buttons: int, slot: int, repeat: int,
) -> bytes:
    """A CMD datagram (header + UserCmd); ``tick`` is also the header's tick."""
    return _CMD.pack(
        C.BP_MAGIC, C.BP_PROTO_VERSION, C.BP_PKT_CMD, seq & 0xFFFFFFFF, tick & 0xFFFFFFFF,
        session, tick & 0xFFFFFFFF, cmd_seq & 0xFFFFFFFF, stick_x, stick_y, buttons, slot, repeat, 0,
    )


def struct_layout(cls: type[ctypes.Structure]) -> list[tuple[str, int, int]]:
    """(field, offset, size) for each field: what the C offset test compares."""
    out = []
    for name, *_ in cls._fields_:
        desc = getattr(cls, name)
        out.append((name, desc.offset, desc.size))
    return out
