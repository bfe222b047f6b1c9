"""One server, many matches: arenas and protocol version 2 through the real UDP server.

Per-arena determinism beside busy neighbours, isolation from a vanished client and a
hostile flood, a lost RESET retried into exactly one new match, the bounds (arena count,
unknown arena, version 1), and every mode and opponent kind on one shared server."""

from __future__ import annotations

import random
import socket
import time

import numpy as np
import pytest
from helpers import LossyProxy, RawClient

from brawlkit.env import BrawlpitEnv, EnvError
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.server_process import ServerGroup

pytestmark = pytest.mark.servers


def _match_bytes(snap: P.Snapshot) -> bytes:
    """A snapshot without the header's seq (the server's packet counter, shared by all
    arenas): what must be identical whatever runs beside the arena."""
    return snap.raw[:4] + snap.raw[8:]


def _play(env: BrawlpitEnv, seed: int, steps: int, busy: list[BrawlpitEnv] | None = None) -> list[bytes]:
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    others = busy or []
    for i, e in enumerate(others):
        e.reset(seed=1000 + i)
    out = [_match_bytes(env.last_snapshot)]
    noise = np.random.default_rng(99)
    for _ in range(steps):
        for e in others:  # the neighbours' commands go out first, interleaved
            e.step_send(noise.uniform(-1, 1, 6).astype(np.float32))
        _, _, term, _, _ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
        for e in others:
            if e.step_recv()[2]:
                e.reset()
        out.append(_match_bytes(env.last_snapshot))
        if term:
            break
    return out


def test_an_arena_plays_the_same_match_alone_or_beside_seven_busy_ones():
    with ServerGroup(1, servers=1) as alone, ServerGroup(8, servers=1) as shared:
        a = BrawlpitEnv(opponent="cpu:4", server=alone.server_for(0))
        b = BrawlpitEnv(opponent="cpu:4", server=shared.server_for(0))
        busy = [BrawlpitEnv(opponent=f"cpu:{1 + i}", server=shared.server_for(0)) for i in range(7)]
        try:
            ref = _play(a, seed=31, steps=600)
            got = _play(b, seed=31, steps=600, busy=busy)
            assert len({e.arena_id for e in [b, *busy]}) == 8  # eight arenas, one process
            assert b.server is busy[0].server
        finally:
            for e in [a, b, *busy]:
                e.close()
    assert len(ref) == len(got) > 100
    assert ref == got


def test_a_vanished_client_and_a_flood_leave_the_other_arenas_playing(server_factory):
    # the victim's timeout: short, but long enough that a loaded machine descheduling this
    # process does not make the seven playing clients look vanished too (a CI run at load
    # ~6 lost one at 0.5 s)
    srv = server_factory(mode="lockstep", client_timeout=2.0)
    envs = [BrawlpitEnv(opponent="cpu:3", server=srv) for _ in range(7)]
    victim = RawClient(srv.address, cpu_level=3)  # an arena of its own, then silence
    victim.cmd(0, 1)
    victim.close()
    joined = RawClient(srv.address, nonce=7, cpu_level=3)  # sends bad tokens from a joined address
    try:
        for i, e in enumerate(envs):
            e.reset(seed=i)
        bad = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        bad.setblocking(False)
        rng = random.Random(5)
        steps = sent = 0
        t0 = last_step = time.monotonic()
        for i in range(100_000):
            kind = i % 4
            if kind == 0:
                pkt = rng.randbytes(rng.randrange(0, 100))
            elif kind == 1:
                pkt = P.pack_cmd(0, rng.getrandbits(32), 0, i, 0.0, 0.0, 0, 0, 4)
            elif kind == 2:
                pkt = P.pack_hello(0, 0, 1)[:-3]  # truncated
            else:
                pkt = P.pack_reset(0, rng.getrandbits(32), 1, 3, 7)  # RESET from a stranger
            if kind == 1 and i % 8 == 1:
                joined.send(pkt)  # a wrong session from an address that holds one
                sent += 1
                continue
            try:
                bad.sendto(pkt, srv.address)
                sent += 1
            except BlockingIOError:
                pass
            # the seven arenas keep playing during the flood: every 500 datagrams, and at
            # least every 0.2 s of a slow (loaded) flood
            if i % 500 == 0 or time.monotonic() - last_step > 0.2:
                last_step = time.monotonic()
                for e in envs:
                    e.step_send(np.zeros(6, np.float32))
                for e in envs:
                    if e.step_recv()[2]:
                        e.reset()
                steps += 1
        flood_s = time.monotonic() - t0
        t0 = time.monotonic()
        for _ in range(300):  # and after it, at full rate (reported, not asserted)
            for e in envs:
                e.step_send(np.zeros(6, np.float32))
            for e in envs:
                if e.step_recv()[2]:
                    e.reset()
        rate = 300 * len(envs) / (time.monotonic() - t0)
        deadline = time.monotonic() + 2.5  # past the victim's timeout, the others still playing
        while time.monotonic() < deadline:
            for e in envs:
                if e.step(np.zeros(6, np.float32))[2]:
                    e.reset()
        stats = srv.stats()
        print(f"flood of {sent} datagrams in {flood_s:.2f}s while 7 arenas stepped {steps} times; "
              f"then {rate:.0f} env-steps/s; stats {stats}")
        assert steps >= 200
        joined.close()
        assert stats["clients_timed_out"] >= 1 and stats["arenas_reclaimed"] >= 1, stats
        assert stats["arenas_active"] == 7, stats
        assert stats["dropped"] >= 0.98 * sent, stats
        for reason in ("bad_len", "bad_session", "not_joined"):
            assert stats[reason] > 0, (reason, stats)
    finally:
        for e in envs:
            e.close()


def test_a_lost_reset_is_retried_into_exactly_one_new_match(server_factory):
    srv = server_factory(mode="lockstep")
    first_reset = {"seen": False}

    def drop_first_reset(data: bytes) -> bool:
        if len(data) == P.PACKET_SIZES[C.BP_PKT_RESET] and data[3] == C.BP_PKT_RESET \
                and not first_reset["seen"]:
            first_reset["seen"] = True
            return True
        return False

    proxy = LossyProxy(srv.address, drop_first_reset)
    env = BrawlpitEnv(opponent="cpu:2", server_address=proxy.address)
    try:
        env.reset(seed=3)  # its RESET is dropped once and re-sent
        assert proxy.dropped == 1
        first = env.last_snapshot.match_id
        env.step(np.zeros(6, np.float32))
        env.reset(seed=4)
        assert env.last_snapshot.match_id == first + 1  # one RESET, one match
    finally:
        env.close()
        proxy.close()
    # the same nonce twice by hand: the second is answered, not applied
    c = RawClient(srv.address, cpu_level=2)
    c.snapshot()
    c.reset(5, nonce=77)
    m1 = c.snapshot().match_id
    c.reset(5, nonce=77)
    assert c.snapshot().match_id == m1
    c.reset(5, nonce=78)
    assert c.snapshot().match_id == m1 + 1


def _error(address: tuple[str, int], pkt: bytes, version: int = C.BP_PROTO_VERSION) -> P.NetError:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    try:
        s.sendto(pkt, address)
        d, _ = s.recvfrom(2048)
    finally:
        s.close()
    # (a version-1 client is answered in version-1 framing: the only ERROR it can read)
    assert len(d) == P.PACKET_SIZES[C.BP_PKT_ERROR] and d[2] == version and d[3] == C.BP_PKT_ERROR
    return P.parse_payload(d, P.NetError)


def test_bounds_are_errors_not_memory(server_factory):
    srv = server_factory(mode="lockstep", max_arenas=2)
    a, b = RawClient(srv.address, cpu_level=1), RawClient(srv.address, nonce=5, cpu_level=1)
    assert a.arena_id != b.arena_id
    err = _error(srv.address, P.pack_hello(0, 0, 9))  # a third arena
    assert err.code == C.BP_ERR_ARENAS_FULL
    err = _error(srv.address, P.pack_hello(0, 1, 9, arena_op=C.BP_ARENA_JOIN, arena_id=12345))
    assert err.code == C.BP_ERR_NO_ARENA
    err = _error(srv.address, P.pack_hello(0, 1, 9, arena_op=C.BP_ARENA_JOIN, arena_id=a.arena_id))
    assert err.code == C.BP_ERR_FULL  # slot 1 is the CPU's
    v1 = bytearray(P.pack_hello(0, 0, 9)[:20])  # a version-1 HELLO: 12 + 8 bytes
    v1[2] = 1
    err = _error(srv.address, bytes(v1), version=1)
    assert err.code == C.BP_ERR_VERSION and b"v2" in err.text
    env = BrawlpitEnv(opponent="cpu:1", server=srv)
    with pytest.raises(EnvError, match="code 6"):
        env.reset(seed=1)
    env.close()
    assert srv.alive()


def test_every_mode_and_opponent_kind_shares_one_server():
    def idle(obs: np.ndarray) -> np.ndarray:
        return np.zeros(6, np.float32)

    with ServerGroup(4, servers=1) as group:
        srv = group.server_for(0)
        envs = [BrawlpitEnv(mode="lockstep", opponent="cpu:3", server=srv),
                BrawlpitEnv(mode="lockstep", opponent=idle, input_delay=2, server=srv),
                BrawlpitEnv(mode="fastforward", opponent="cpu:2", speed=20, server=srv),
                BrawlpitEnv(mode="realtime", opponent="cpu:1", server=srv)]
        try:
            for i, e in enumerate(envs):
                e.reset(seed=i)
            for _ in range(40):
                for e in envs:
                    _, _, term, _, info = e.step(np.zeros(6, np.float32))
                    assert info["ticks_elapsed"] >= 1
            assert len({e.arena_id for e in envs}) == 4
            assert envs[1]._op is not None  # the callable plays slot 1 of the same arena
            assert srv.stats()["arenas_active"] == 4
        finally:
            for e in envs:
                e.close()
