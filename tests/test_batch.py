"""BATCH / BATCH_SNAP against a real brawlpit_server (docs/protocol.md "Batches"): one
datagram commands several seats of several arenas and one datagram answers them, byte
for byte the SNAPSHOTs those seats get on their own; a malformed envelope is dropped
whole and a bad item alone, each counted by its reason, the good items still answered."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from helpers import RawClient

from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C

pytestmark = pytest.mark.servers


def _seats(srv: Any) -> tuple[RawClient, RawClient, RawClient]:
    """Arena A: two clients (slots 0 and 1); arena B: one client and the CPU."""
    a0 = RawClient(srv.address, want_slot=0, cpu_level=0)
    a1 = RawClient(srv.address, want_slot=1, nonce=5, arena_op=C.BP_ARENA_JOIN, arena_id=a0.arena_id)
    b0 = RawClient(srv.address, want_slot=0, nonce=7, cpu_level=2)
    for c in (a0, a1, b0):
        c.s.settimeout(0.3)
        _drain(c.s)
    return a0, a1, b0


def _drain(s: socket.socket) -> list[bytes]:
    got = []
    try:
        while True:
            got.append(s.recv(65536))
    except (TimeoutError, BlockingIOError):
        return got


def _item(c: RawClient, tag: int, tick: int, seq: int, **kw: Any) -> P.BatchItem:
    cmd = P.pack_cmd(seq, kw.get("session", c.session), tick, seq, 0.25, -0.5, 1, c.slot, 4)
    return P.BatchItem(kw.get("arena_id", c.arena_id), tag, kw.get("slot", c.slot), cmd)


def _lane_socket(srv: Any, host: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    s.connect(srv.address)
    s.settimeout(2.0)
    return s


def test_a_batch_steps_several_seats_and_answers_in_one_datagram(server_factory: Any) -> None:
    srv, ref = server_factory(mode="lockstep", seed=11), server_factory(mode="lockstep", seed=11)
    a0, a1, b0 = _seats(srv)
    lane = _lane_socket(srv)
    lane.send(P.pack_batch(1, 77, [_item(a0, 10, 0, 1), _item(a1, 11, 0, 1), _item(b0, 12, 0, 1)]))
    batch_seq, items = P.parse_batch_snap(lane.recv(65536))
    assert batch_seq == 77
    assert [(i.arena_id, i.tag, i.slot) for i in items] == [
        (a0.arena_id, 10, 0), (a1.arena_id, 11, 1), (b0.arena_id, 12, 0)]
    snaps = [P.parse_snapshot(i.datagram) for i in items]
    assert [(s.tick, s.ack_cmd_seq, s.phase) for s in snaps] == [(4, 1, C.BP_PHASE_PLAYING)] * 3
    # the own sockets heard nothing: their answers went into the BATCH_SNAP
    assert all(_drain(c.s) == [] for c in (a0, a1, b0))
    # the newest SNAPSHOT each seat gets when the same commands go one by one (slot 0 is
    # first answered at tick 0, then at tick 4 once slot 1's command lets the arena
    # advance), but for the header's seq: the server's counter over everything it sends
    r0, r1, rb = _seats(ref)
    for c, tag in ((r0, 10), (r1, 11), (rb, 12)):
        c.send(_item(c, tag, 0, 1).datagram)
    alone = [[d for d in _drain(c.s) if d[3] == C.BP_PKT_SNAPSHOT][-1] for c in (r0, r1, rb)]
    for got, want in zip(items, alone, strict=True):
        assert got.datagram[:4] == want[:4] and got.datagram[8:] == want[8:]
    stats = srv.stats()
    assert (stats["batches"], stats["batch_items"], stats["dropped"]) == (1, 3, 0)


def test_bad_batches_are_dropped_and_counted_and_good_items_still_answered(server_factory: Any) -> None:
    srv = server_factory(mode="lockstep", seed=3)
    a0, a1, b0 = _seats(srv)
    lane = _lane_socket(srv)
    good = [_item(a0, 1, 0, 1), _item(a1, 2, 0, 1)]
    head = P.pack_batch(1, 1, good)[:P.BATCH_HEAD_SIZE]
    bad_envelopes = {
        "bad_len": [head[:P.HEADER_SIZE + 3],                       # shorter than its head
                    P.pack_batch(1, 1, good)[:-1]],                  # count says 2, one short
        "bad_batch": [head[:P.HEADER_SIZE] + (0).to_bytes(2, "little") + head[P.HEADER_SIZE + 2:],
                      head[:P.HEADER_SIZE] + (C.BP_BATCH_MAX + 1).to_bytes(2, "little")
                      + head[P.HEADER_SIZE + 2:] + bytes(P.BATCH_ITEM_SIZE)],
    }
    for dgrams in bad_envelopes.values():
        for d in dgrams:
            lane.send(d)
    snap_hdr = bytes(P.make_header(C.BP_PKT_SNAPSHOT, 0))
    bad_items = {
        "bad_session": _item(b0, 3, 0, 1, session=b0.session ^ 1),
        "not_joined": _item(b0, 4, 0, 1, arena_id=b0.arena_id + 4096),
        "bad_slot": _item(b0, 5, 0, 1, slot=7),
        "bad_type": P.BatchItem(b0.arena_id, 6, 0, snap_hdr + bytes(28)),
        "bad_magic": P.BatchItem(b0.arena_id, 7, 0, b"\0\0" + _item(b0, 7, 0, 1).datagram[2:]),
    }
    lane.send(P.pack_batch(2, 9, [good[0], *bad_items.values(), good[1]]))
    _, items = P.parse_batch_snap(lane.recv(65536))
    assert [i.tag for i in items] == [1, 2]  # only the good seats, each with its step taken
    assert all(P.parse_snapshot(i.datagram).tick == 4 for i in items)
    # a seat commanded from another host is not commanded (127.0.0.2: same machine, other IP)
    stranger = _lane_socket(srv, "127.0.0.2")
    stranger.send(P.pack_batch(3, 9, [_item(b0, 8, 0, 1)]))
    _, items = P.parse_batch_snap(stranger.recv(65536))
    assert items == []  # the envelope was fine: answered, with nothing in it
    stats = srv.stats()
    assert stats["bad_len"] == 2 and stats["bad_batch"] == 2
    assert stats["bad_session"] == stats["bad_slot"] == stats["bad_type"] == stats["bad_magic"] == 1
    assert stats["not_joined"] == 2
    assert stats["batches"] == 2 and stats["batch_items"] == 2
    # and the arena that was never commanded still plays, one by one
    b0.s.settimeout(2.0)
    b0.cmd(0, 1)
    assert b0.snapshot().tick == 4


def test_batch_packing_refuses_what_the_server_would_drop() -> None:
    item = P.BatchItem(1, 0, 0, P.pack_cmd(1, 2, 0, 1, 0.0, 0.0, 0, 0, 4))
    with pytest.raises(ValueError, match="1..128 items"):
        P.pack_batch(1, 1, [])
    with pytest.raises(ValueError, match="one CMD datagram"):
        P.pack_batch(1, 1, [item._replace(datagram=item.datagram[:-1])])
    data = P.pack_batch(1, 1, [item] * 3)
    assert len(data) == P.BATCH_HEAD_SIZE + 3 * P.BATCH_ITEM_SIZE == 12 + 8 + 3 * 48
    with pytest.raises(P.ProtocolError, match="not a BATCH_SNAP"):
        P.parse_batch_snap(data)
