"""Player identity and spectators on brawlpit_server (docs/protocol.md "Player identity",
"Spectators"): IDENT sets a slot's name and ticket and every client of the arena
learns it through PEER packets (also at joins, leaves and every RESET; the CPU is
"cpu:L"); a malformed IDENT is dropped and counted; a spectator receives every
snapshot of a lockstep match, may not act, is bounded per arena and never keeps an
arena alive."""

from __future__ import annotations

import random
import socket
import time
from typing import Any

import pytest
from helpers import RawClient

from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C

pytestmark = pytest.mark.servers


def drain(c: RawClient, quiet_s: float = 0.15) -> list[bytes]:
    """Every datagram that arrives until ``quiet_s`` passes without one."""
    out = []
    c.s.settimeout(quiet_s)
    try:
        while True:
            d, _ = c.s.recvfrom(2048)
            out.append(d)
    except TimeoutError:
        pass
    finally:
        c.s.settimeout(2.0)
    return out


def peers(datagrams: list[bytes]) -> list[P.Peer]:
    return [p for d in datagrams if (p := P.peer_or_none(d)) is not None]


def errors(datagrams: list[bytes]) -> list[Any]:
    return [P.parse_payload(d, P.NetError) for d in datagrams
            if P.validate_datagram(d).type == C.BP_PKT_ERROR]


def ident(c: RawClient, name: str, ticket: str = "") -> None:
    c.send(P.pack_ident(0, c.session, name, ticket))


def next_snapshot(c: RawClient, after: int) -> P.Snapshot:
    """The first snapshot of a tick past ``after`` (or of a match that is over): in
    lockstep the first of two clients to send is answered with the current one."""
    while True:
        s = c.snapshot()
        if s.tick > after or s.over:
            return s


def pair(srv: Any, quiet: bool = True) -> tuple[RawClient, RawClient]:
    """Two clients in one new arena (slot 0 creates, slot 1 joins), sockets drained
    (``quiet``: lockstep, where the server falls silent until the next CMD)."""
    c0 = RawClient(srv.address, want_slot=0, arena_op=C.BP_ARENA_CREATE, cpu_level=0)
    c1 = RawClient(srv.address, want_slot=1, arena_op=C.BP_ARENA_JOIN, arena_id=c0.arena_id)
    if quiet:
        drain(c0), drain(c1)
    return c0, c1


def test_ident_is_announced_to_both_clients_with_names_and_tickets(server_factory):
    srv = server_factory(mode="lockstep")
    c0 = RawClient(srv.address, want_slot=0, arena_op=C.BP_ARENA_CREATE, cpu_level=0)
    first = peers(drain(c0))  # the join: slot 0 is a client without a name yet, slot 1 empty
    assert first == [P.Peer(c0.arena_id, 0, C.BP_PEER_CLIENT, "", ""),
                     P.Peer(c0.arena_id, 1, C.BP_PEER_EMPTY, "", "")]
    c1 = RawClient(srv.address, want_slot=1, arena_op=C.BP_ARENA_JOIN, arena_id=c0.arena_id)
    assert [p.kind for p in peers(drain(c0))] == [C.BP_PEER_CLIENT, C.BP_PEER_CLIENT]
    drain(c1)
    ident(c0, "alpha", "tkt-alpha.1")
    want0 = P.Peer(c0.arena_id, 0, C.BP_PEER_CLIENT, "alpha", "tkt-alpha.1")
    for c in (c0, c1):
        got = peers(drain(c))
        assert [p.slot for p in got] == [0, 1] and got[0] == want0, got
    ident(c1, "beta bot")
    want1 = P.Peer(c0.arena_id, 1, C.BP_PEER_CLIENT, "beta bot", "")
    for c in (c0, c1):
        assert peers(drain(c)) == [want0, want1]
    # an IDENT that changes nothing: both PEERs to its sender only
    ident(c1, "beta bot")
    assert peers(drain(c1)) == [want0, want1]
    assert peers(drain(c0)) == []
    # the name is kept until the client leaves
    c1.send(P.pack_bye(0, c1.session))
    assert peers(drain(c0)) == [want0, P.Peer(c0.arena_id, 1, C.BP_PEER_EMPTY, "", "")]
    assert srv.stats()["bad_ident"] == 0


def test_cpu_slot_is_named_cpu_level(server_factory):
    srv = server_factory(mode="lockstep", cpu_level=3)
    c = RawClient(srv.address)
    assert peers(drain(c)) == [P.Peer(c.arena_id, 0, C.BP_PEER_CLIENT, "", ""),
                               P.Peer(c.arena_id, 1, C.BP_PEER_CPU, "cpu:3", "")]
    c.reset(5, cpu_level=7)  # every new match re-announces both slots, before its snapshot
    got = drain(c)
    types = [P.validate_datagram(d).type for d in got]
    assert types == [C.BP_PKT_PEER, C.BP_PKT_PEER, C.BP_PKT_SNAPSHOT], types
    assert peers(got)[1] == P.Peer(c.arena_id, 1, C.BP_PEER_CPU, "cpu:7", "")
    c.reset(6, cpu_level=C.BP_CPU_NONE)
    assert peers(drain(c))[1].kind == C.BP_PEER_EMPTY


def test_peers_at_every_reset(server_factory):
    srv = server_factory(mode="lockstep")
    c0, c1 = pair(srv)
    ident(c0, "alpha")
    ident(c1, "beta")
    drain(c0), drain(c1)
    c1.reset(9)
    for c in (c0, c1):
        got = drain(c)
        assert [p.name for p in peers(got)] == ["alpha", "beta"]
        assert P.validate_datagram(got[-1]).type == C.BP_PKT_SNAPSHOT


def _raw_ident(session: int, name: bytes, ticket: bytes = b"") -> bytes:
    """An IDENT with these exact field bytes (NUL-padded; ctypes would cut at a NUL)."""
    return (bytes(P.make_header(C.BP_PKT_IDENT, 0)) + session.to_bytes(4, "little")
            + name.ljust(C.BP_NAME_LEN, b"\0") + ticket.ljust(C.BP_TICKET_LEN, b"\0"))


def test_bad_idents_are_dropped_and_counted(server_factory):
    srv = server_factory(mode="lockstep")
    c0, c1 = pair(srv)
    ident(c0, "alpha")
    drain(c0), drain(c1)
    before = srv.stats()
    bad_field = [
        _raw_ident(c0.session, b"tab\there"),            # non-printable
        _raw_ident(c0.session, b""),                     # empty name
        _raw_ident(c0.session, b"ok", b"t\x7f"),         # non-printable ticket
        _raw_ident(c0.session, b"x" * 32),               # no NUL: 32 characters
        _raw_ident(c0.session, b"ok\0junk"),             # text after the NUL
    ]
    for d in bad_field:
        c0.send(d)
    errs = errors(drain(c0))
    assert [e.code for e in errs] == [C.BP_ERR_BAD_REQUEST] * len(bad_field)
    assert {e.text for e in errs} == {b"bad name", b"bad ticket"}
    c0.send(_raw_ident(c0.session ^ 1, b"mallory"))      # wrong session
    c0.send(P.pack_ident(0, c0.session, "mallory")[:-1])  # wrong size
    c0.send(P.pack_ident(0, c0.session, "mallory") + b"\0")
    stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    stranger.sendto(P.pack_ident(0, c0.session, "mallory"), srv.address)  # not joined
    stranger.close()
    assert drain(c0) == [] and drain(c1) == []  # nothing announced, nothing answered
    after = srv.stats()
    assert after["bad_ident"] - before["bad_ident"] == len(bad_field)
    assert after["bad_session"] - before["bad_session"] == 1
    assert after["bad_len"] - before["bad_len"] == 2
    assert after["not_joined"] - before["not_joined"] == 1
    # the name is unchanged, the match plays on
    ident(c0, "alpha")
    assert peers(drain(c0))[0].name == "alpha"
    c0.cmd(0, 1), c1.cmd(0, 1)
    assert next_snapshot(c0, 0).tick == 4


def test_a_flood_of_random_idents_is_counted_and_harmless(server_factory):
    srv = server_factory(mode="lockstep", cpu_level=2)
    c = RawClient(srv.address)
    drain(c)
    rng = random.Random(13)
    for i in range(3000):
        name = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 33)))
        pkt = _raw_ident(c.session if i % 2 else rng.getrandbits(32), name[:32])
        if i % 7 == 0:
            pkt = pkt[: rng.randrange(len(pkt))]
        c.send(pkt)
        if i % 500 == 0:
            drain(c, 0.01)
    drain(c)
    stats = srv.stats()
    assert stats["bad_ident"] > 0 and stats["bad_session"] > 0 and stats["bad_len"] > 0
    c.cmd(0, 1)
    assert c.snapshot().tick == 4


# ----------------------------------------------------------------- spectators
def spectator(srv: Any, arena_id: int, nonce: int = 501) -> RawClient:
    return RawClient(srv.address, want_slot=C.BP_SLOT_SPECTATE, nonce=nonce,
                     arena_op=C.BP_ARENA_JOIN, arena_id=arena_id)


def test_spectator_sees_every_snapshot_of_a_lockstep_match(server_factory):
    srv = server_factory(mode="lockstep")
    c0, c1 = pair(srv)
    ident(c0, "alpha")
    drain(c0), drain(c1)
    sp = spectator(srv, c0.arena_id)
    assert sp.slot == C.BP_SLOT_SPECTATE
    got = drain(sp)  # after its WELCOME: both PEERs and the current snapshot
    assert [p.name for p in peers(got)] == ["alpha", ""]
    assert P.parse_snapshot(got[-1]).tick == 0
    assert drain(c0) == [] and drain(c1) == []  # a spectator changes no slot
    rng = random.Random(2)
    tick, seq, seen = 0, 1, []
    while True:
        for c in (c0, c1):
            c.cmd(tick, seq, rng.uniform(-1, 1), rng.uniform(-1, 1), rng.randrange(16), rep=4)
        s0, s1 = next_snapshot(c0, tick), next_snapshot(c1, tick)
        assert s0.tick == s1.tick
        seen.append(sp.snapshot())  # the spectator gets each one as well
        tick, seq = s0.tick, seq + 1
        if s0.over or seq > 400:
            break
    assert drain(sp) == []
    assert [s.tick for s in seen] == list(range(4, tick + 1, 4))
    assert seen[-1].players == s0.players and seen[-1].match_id == s0.match_id
    assert all(s.ack_cmd_seq == 0 for s in seen)
    # a spectator may not act: CMD and RESET are refused with BAD_SLOT
    before = srv.stats()
    sp.cmd(tick, 1, slot=0)
    sp.reset(3)
    sp.send(P.pack_ident(0, sp.session, "watcher"))
    errs = errors(drain(sp))
    assert [e.code for e in errs] == [C.BP_ERR_BAD_SLOT] * 3
    assert srv.stats()["bad_slot"] - before["bad_slot"] == 3
    # BYE leaves; the players go on
    sp.send(P.pack_bye(0, sp.session))
    c0.reset(4)
    assert drain(sp) == []


def test_fifth_spectator_is_refused_full(server_factory):
    srv = server_factory(mode="lockstep", cpu_level=1)
    c = RawClient(srv.address)
    watchers = [spectator(srv, c.arena_id, nonce=600 + i) for i in range(C.BP_MAX_SPECTATORS)]
    fifth = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fifth.settimeout(2.0)
    fifth.sendto(P.pack_hello(0, C.BP_SLOT_SPECTATE, 7, arena_op=C.BP_ARENA_JOIN,
                              arena_id=c.arena_id), srv.address)
    err = P.parse_payload(fifth.recvfrom(2048)[0], P.NetError)
    assert err.code == C.BP_ERR_FULL and err.text == b"spectators full"
    # spectate needs JOIN of an existing arena
    fifth.sendto(P.pack_hello(0, C.BP_SLOT_SPECTATE, 8, arena_op=C.BP_ARENA_ANY), srv.address)
    assert P.parse_payload(fifth.recvfrom(2048)[0], P.NetError).code == C.BP_ERR_BAD_REQUEST
    fifth.sendto(P.pack_hello(0, C.BP_SLOT_SPECTATE, 9, arena_op=C.BP_ARENA_JOIN,
                              arena_id=c.arena_id + 4096), srv.address)
    assert P.parse_payload(fifth.recvfrom(2048)[0], P.NetError).code == C.BP_ERR_NO_ARENA
    fifth.close()
    # one leaves: a place frees up; a spectator's re-sent HELLO is answered with its WELCOME
    watchers[0].send(P.pack_bye(0, watchers[0].session))
    again = spectator(srv, c.arena_id, nonce=700)
    assert again.slot == C.BP_SLOT_SPECTATE
    watchers[1].send(P.pack_hello(0, C.BP_SLOT_SPECTATE, 601, arena_op=C.BP_ARENA_JOIN,
                                  arena_id=c.arena_id))
    w = P.parse_payload(watchers[1].recv_type(C.BP_PKT_WELCOME), P.NetWelcome)
    assert w.session == watchers[1].session and w.slot == C.BP_SLOT_SPECTATE
    assert srv.stats()["arenas_active"] == 1


def test_spectators_never_keep_an_arena_alive(server_factory):
    srv = server_factory(mode="fastforward", speed=20)
    c0, c1 = pair(srv, quiet=False)
    sp = spectator(srv, c0.arena_id)
    for _ in range(30):  # live: a snapshot every tick
        assert sp.snapshot().match_id == 1
    c0.send(P.pack_bye(0, c0.session))
    c1.send(P.pack_bye(0, c1.session))
    time.sleep(0.2)
    stats = srv.stats()
    assert stats["arenas_active"] == 0 and stats["arenas_reclaimed"] == 1
    drain(sp)  # what was in flight; then silence: the arena is gone
    # its session ended with the arena: a CMD is from nobody, its HELLO finds no arena
    before = srv.stats()["not_joined"]
    sp.cmd(0, 1, slot=0)
    time.sleep(0.1)
    assert srv.stats()["not_joined"] == before + 1
    sp.send(P.pack_hello(0, C.BP_SLOT_SPECTATE, 5, arena_op=C.BP_ARENA_JOIN,
                         arena_id=c0.arena_id))
    assert P.parse_payload(sp.recv_type(C.BP_PKT_ERROR), P.NetError).code == C.BP_ERR_NO_ARENA


def test_silent_spectator_times_out(server_factory):
    srv = server_factory(mode="lockstep", cpu_level=1, client_timeout=0.5)
    c = RawClient(srv.address)
    sp = spectator(srv, c.arena_id)
    for _ in range(8):  # the player keeps its slot by re-sending HELLO; the spectator is silent
        c.send(P.pack_hello(0, 255, 99))
        time.sleep(0.15)
    stats = srv.stats()
    assert stats["clients_timed_out"] == 1 and stats["arenas_active"] == 1
    drain(sp)
    c.reset(2)
    assert peers(drain(sp)) == []
