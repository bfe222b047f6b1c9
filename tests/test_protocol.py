"""Wire structs: the ctypes mirrors, the struct fast paths and the C header agree."""

from __future__ import annotations

import ctypes
import random
import struct
from pathlib import Path

import pytest
from helpers import c_layout

from brawlkit.common.paths import header_path
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C, header_constants

STRUCTS = [P.NetHeader, P.UserCmd, P.NetPlayer, P.MatchState, P.SnapshotPacket, P.NetHello,
           P.NetWelcome, P.NetBye, P.NetReset, P.NetError, P.NetIdent, P.NetPeer]


def test_c_sizes_and_offsets_match_ctypes(cc, tmp_path: Path) -> None:
    assert c_layout(cc, STRUCTS, tmp_path) == []


def test_normative_sizes() -> None:
    assert ctypes.sizeof(P.NetHeader) == 12
    assert ctypes.sizeof(P.UserCmd) == 28
    assert ctypes.sizeof(P.NetPlayer) == 32
    assert ctypes.sizeof(P.MatchState) == 16
    assert P.SNAPSHOT_SIZE == 92


def test_struct_fast_path_matches_ctypes() -> None:
    rng = random.Random(1)
    for _ in range(500):
        pkt = P.SnapshotPacket()
        pkt.hdr = P.make_header(C.BP_PKT_SNAPSHOT, rng.getrandbits(32), rng.getrandbits(32))
        pkt.match.match_id = rng.getrandbits(32)
        pkt.match.ticks_left = rng.randrange(9001)
        pkt.match.phase, pkt.match.winner = rng.randrange(3), rng.choice([0, 1, 2, 255])
        for i in range(2):
            p = pkt.players[i]
            p.x, p.y, p.vx, p.vy = (rng.uniform(-300, 300) for _ in range(4))
            p.damage, p.shield = rng.uniform(0, 999), rng.uniform(0, 60)
            p.stocks, p.facing, p.flags = rng.randrange(4), rng.choice([-1, 1]), rng.getrandbits(6)
            p.hitstun_ticks, p.jumps_left, p.slot = rng.getrandbits(16), rng.randrange(3), i
        snap = P.parse_snapshot(bytes(pkt))
        assert snap.seq == pkt.hdr.seq and snap.tick == pkt.hdr.tick
        assert snap.match_id == pkt.match.match_id and snap.ticks_left == pkt.match.ticks_left
        for i in range(2):
            for f, _, _ in P.struct_layout(P.NetPlayer):
                assert getattr(snap.players[i], f) == getattr(pkt.players[i], f), f
    cmd = P.pack_cmd(7, 0xDEADBEEF, 123, 9, 0.25, -1.0, 0b1010, 1, 4)
    u = P.UserCmd.from_buffer_copy(cmd, P.HEADER_SIZE)
    assert (u.session, u.tick, u.cmd_seq, u.stick_x, u.stick_y, u.buttons, u.slot, u.repeat) == (
        0xDEADBEEF, 123, 9, 0.25, -1.0, 0b1010, 1, 4)


@pytest.mark.parametrize(
    "mutate, reason",
    [
        (lambda b: b[:40], "bytes"),
        (lambda b: b"\x00\x00" + b[2:], "magic"),
        (lambda b: b[:2] + bytes([9]) + b[3:], "version"),
        (lambda b: b[:3] + bytes([99]) + b[4:], "unknown packet type"),
        (lambda b: b + b"\x00", "bytes"),
    ],
)
def test_malformed_snapshots_are_rejected_with_reason(mutate, reason) -> None:
    good = bytes(P.SnapshotPacket(hdr=P.make_header(C.BP_PKT_SNAPSHOT, 1)))
    with pytest.raises(P.ProtocolError, match=reason):
        P.parse_snapshot(mutate(good))


def test_non_finite_floats_are_rejected() -> None:
    pkt = P.SnapshotPacket(hdr=P.make_header(C.BP_PKT_SNAPSHOT, 1))
    pkt.players[0].x = float("nan")
    with pytest.raises(P.ProtocolError, match="non-finite"):
        P.parse_snapshot(bytes(pkt))


def test_constants_come_from_the_header(tmp_path: Path) -> None:
    values = header_constants(header_path())
    assert values["BP_MAGIC"] == 0xB17E and values["BP_MATCH_TICKS"] == 9000
    assert C.BP_OBS_DIM == 31 and isinstance(C.BP_BLAST_X, float)
    bad = tmp_path / "bad.h"
    bad.write_text("#define BP_OK 1\n#define BP_EXPR (BP_OK + 1)\n")
    with pytest.raises(ValueError, match="bad.h:2"):
        header_constants(bad)
    # the one header reader gives PARENA the float32 C computes with
    from brawlkit.parena_compiler.header import read_header

    odd = tmp_path / "odd.h"
    odd.write_text("#define BP_TENTH 0.1f\n#define X_TENTH 0.1\n")
    assert read_header(odd)["BP_TENTH"] == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert read_header(odd)["X_TENTH"] == 0.1 != read_header(odd)["BP_TENTH"]
    assert header_constants(odd)["BP_TENTH"] == read_header(odd)["BP_TENTH"]


def test_struct_formats_are_derived_from_the_mirrors() -> None:
    assert P.struct_format(P.NetHeader) == "HBBII"
    assert P.struct_format(P.NetHello) == "BBBBIIIf"
    assert P.struct_format(P.NetError).endswith(f"{C.BP_ERROR_TEXT_LEN}s")
    assert struct.calcsize("<" + P.struct_format(P.SnapshotPacket)) == P.SNAPSHOT_SIZE


def test_every_packer_makes_a_valid_datagram() -> None:
    pkts = {
        C.BP_PKT_HELLO: P.pack_hello(1, C.BP_SLOT_ANY, 0xABCD, arena_op=C.BP_ARENA_JOIN,
                                     arena_id=9, speed=2.5),
        C.BP_PKT_RESET: P.pack_reset(2, 77, 2**32 + 5, C.BP_CPU_KEEP, 0xFFFF),
        C.BP_PKT_BYE: P.pack_bye(3, 77),
        C.BP_PKT_CMD: P.pack_cmd(4, 77, 10, 1, 0.5, 0.0, 3, 0, 4),
        C.BP_PKT_SNAPSHOT: P.pack_snapshot([P.PlayerState(*[0] * 13)] * 2, ticks_left=5),
    }
    for ptype, data in pkts.items():
        assert P.validate_datagram(data).type == ptype and len(data) == P.PACKET_SIZES[ptype]
    hello = P.parse_payload(pkts[C.BP_PKT_HELLO], P.NetHello)
    assert (hello.want_slot, hello.nonce, hello.arena_op, hello.arena_id, hello.speed) == (
        C.BP_SLOT_ANY, 0xABCD, C.BP_ARENA_JOIN, 9, 2.5)
    assert (hello.mode, hello.cpu_level) == (C.BP_MODE_DEFAULT, C.BP_CPU_KEEP)
    reset = P.parse_payload(pkts[C.BP_PKT_RESET], P.NetReset)
    assert (reset.session, reset.seed, reset.nonce, reset.cpu_level) == (77, 5, 0xFFFF, C.BP_CPU_KEEP)
    assert P.parse_snapshot(pkts[C.BP_PKT_SNAPSHOT]).ticks_left == 5
    assert P.snapshot_or_none(pkts[C.BP_PKT_CMD]) is None


def test_ident_and_peer_pack_and_parse() -> None:
    data = P.pack_ident(5, 0xCAFE, "bot alpha", "tkt.1-x")
    assert P.validate_datagram(data).type == C.BP_PKT_IDENT
    assert len(data) == P.PACKET_SIZES[C.BP_PKT_IDENT] == 12 + 228
    ident = P.parse_payload(data, P.NetIdent)
    assert (ident.session, ident.name, ident.ticket) == (0xCAFE, b"bot alpha", b"tkt.1-x")
    for kwargs, field in (({"name": ""}, "name"), ({"name": "a\tb"}, "name"),
                          ({"name": "x" * 32}, "name"), ({"name": "ok", "ticket": "é"}, "ticket"),
                          ({"name": "ok", "ticket": "t" * 192}, "ticket")):
        with pytest.raises(ValueError, match=field):
            P.pack_ident(0, 1, **kwargs)
    assert len(P.pack_ident(0, 1, "n" * 31, "t" * 191)) == 240
    pkt = P.NetPeer(arena_id=7, slot=1, kind=C.BP_PEER_CPU, name=b"cpu:3")
    data = bytes(P.make_header(C.BP_PKT_PEER, 9)) + bytes(pkt)
    assert P.parse_peer(data) == P.Peer(7, 1, C.BP_PEER_CPU, "cpu:3", "")
    assert P.peer_or_none(data[:-1]) is None
    for bad in (P.NetPeer(slot=2), P.NetPeer(kind=9), P.NetPeer(name=b"a\x01")):
        with pytest.raises(P.ProtocolError):
            P.parse_peer(bytes(P.make_header(C.BP_PKT_PEER, 9)) + bytes(bad))
    with pytest.raises(P.ProtocolError, match="expected PEER"):
        P.parse_peer(P.pack_ident(0, 1, "x"))
    spect = P.parse_payload(P.pack_hello(0, C.BP_SLOT_SPECTATE, 3, arena_op=C.BP_ARENA_JOIN,
                                         arena_id=12), P.NetHello)
    assert (spect.want_slot, spect.arena_op, spect.arena_id) == (254, C.BP_ARENA_JOIN, 12)


def test_struct_layouts_are_read_from_the_header_not_retyped(tmp_path):
    """The mirrors' fields come from the header's typedefs (brawlkit/wire/header.py):
    packed or natural alignment, nested structs, pointers, arrays sized by literals,
    defines and sizeof; anything outside that subset is refused naming file and line."""
    import ctypes

    from brawlkit.wire.header import read_structs, struct_size
    from brawlkit.wire.mirrors import mirror

    h = tmp_path / "t.h"
    h.write_text("#define N_X 3\n#pragma pack(push, 1)\ntypedef struct {\n  uint8_t a;\n"
                 "  uint32_t b; /* a comment; with a semicolon */\n} Packed;\n"
                 "#pragma pack(pop)\ntypedef struct {\n  uint8_t a;\n  float x, y[N_X];\n"
                 "  Packed p;\n  void *ptr;\n  uint8_t raw[sizeof(Packed) + 2];\n} Natural;\n")
    decls = read_structs(h)
    assert decls["Packed"].packed and not decls["Natural"].packed
    assert [(f.name, f.ctype, f.count) for f in decls["Natural"].fields] == [
        ("a", "uint8_t", None), ("x", "float", None), ("y", "float", 3), ("p", "Packed", None),
        ("ptr", "*", None), ("raw", "uint8_t", 7)]

    class Packed(ctypes.LittleEndianStructure):
        _pack_ = 1
        _fields_ = [("a", ctypes.c_uint8), ("b", ctypes.c_uint32)]

    class Natural(ctypes.Structure):
        _fields_ = [("a", ctypes.c_uint8), ("x", ctypes.c_float), ("y", ctypes.c_float * 3),
                    ("p", Packed), ("ptr", ctypes.c_void_p), ("raw", ctypes.c_uint8 * 7)]

    assert struct_size(decls["Packed"], decls) == ctypes.sizeof(Packed) == 5
    assert struct_size(decls["Natural"], decls) == ctypes.sizeof(Natural)
    for bad in ("unsigned long n;", "int bits : 3;", "struct Other o;", "char s[LEN];"):
        h.write_text(f"typedef struct {{\n  {bad}\n}} Bad;\n")
        with pytest.raises(ValueError, match=r"t\.h:1"):
            read_structs(h)
    with pytest.raises(ValueError, match="no 'typedef struct"):
        mirror("NoSuchStruct")(type("X", (ctypes.Structure,), {}))
    # the real mirrors: every one is the header's declaration, field for field
    from brawlkit.wire.mirrors import declarations

    for cls in (P.NetHeader, P.SnapshotPacket, P.NetPeer):
        assert [n for n, *_ in cls._fields_] == [f.name for f in declarations()[cls.__name__]
                                                 .fields]
