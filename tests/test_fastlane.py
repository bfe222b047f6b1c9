"""The vec env's fast lane (brawlkit/env/fastlane.py, native/src/vecstep.c).

The lane must be invisible except in speed: the same observations, rewards, dones and
infos as the Python path, step for step, whatever the opponent, layout or episode
ends; the same CMD bytes as the Python packer; malformed and stale datagrams dropped
and counted; and every unhappy path (a lost datagram, a dead server) finished by the
env's own receive loop.
"""

from __future__ import annotations

import ctypes
import functools
import socket
from contextlib import closing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import LossyProxy, c_layout

from brawlkit.env import BrawlpitEnv, EnvError
from brawlkit.env import fastlane as F
from brawlkit.env.actions import decode_action
from brawlkit.env.observation import (
    INPUT_LAYOUT_CLOCK,
    INPUT_LAYOUT_OBS,
    INPUT_LAYOUT_SELF,
    build_input,
)
from brawlkit.env.rewards import make_reward
from brawlkit.env.vecenv import BrawlpitVecEnv
from brawlkit.wire import protocol as P
from brawlkit.wire.constants import C
from brawlkit.wire.server_process import ServerGroup


def test_bpvclient_mirror_matches_c(cc: list[str], tmp_path: Path) -> None:
    from brawlkit.common.paths import native_dir

    flags = [*cc, "-I", str(native_dir() / "src"), "-include", "vecstep.h"]
    assert c_layout(flags, [F.BpvClient], tmp_path) == []
    assert F.lib().bpv_client_size() == ctypes.sizeof(F.BpvClient)


def _pair() -> tuple[socket.socket, socket.socket]:
    """Two connected UDP sockets on 127.0.0.1: a lane client and a fake server."""
    a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    a.bind(("127.0.0.1", 0))
    b.bind(("127.0.0.1", 0))
    a.connect(b.getsockname())
    b.connect(a.getsockname())
    return a, b


def _player(x: float, damage: float = 0.0) -> P.PlayerState:
    return P.PlayerState(x, 1.5, 0.25, -0.5, damage, 40.0, 3, 1, 1, 2, 0, 1, 0)


@pytest.mark.parametrize("layout", [INPUT_LAYOUT_OBS, INPUT_LAYOUT_SELF, INPUT_LAYOUT_CLOCK])
def test_bpv_step_packs_like_python_and_drops_what_python_drops(layout: int) -> None:
    """Against a fake server: the CMD is the Python packer's bytes; five bad answers
    (short, wrong magic, other match, stale tick, a NaN) are skipped and counted; the
    good one becomes the input Python's builder makes from it."""
    lane = F.FastLane(1, action_repeat=4, input_layout=layout)
    me, srv = _pair()
    try:
        c = lane.clients[0]
        c.active, c.fd, c.session, c.slot, c.seq, c.cmd_seq = 1, me.fileno(), 77, 0, 10, 5
        c.match_id, c.tick = 3, 100
        action = np.array([0.3, -2.0, 0.5, -0.1, 0.0, float("nan")], np.float32)
        good = P.pack_snapshot([_player(1.0, 12.0), _player(-2.0)], match_id=3, tick=104,
                               ticks_left=5000)
        bad = [good[:40], b"\x00\x00" + good[2:],
               P.pack_snapshot([_player(1.0), _player(-2.0)], match_id=4, tick=104),
               P.pack_snapshot([_player(1.0), _player(-2.0)], match_id=3, tick=103),
               P.pack_snapshot([_player(float("nan")), _player(-2.0)], match_id=3, tick=104)]
        for d in bad + [good]:
            srv.send(d)
        lane.actions[0] = action
        lane._lib.bpv_step(lane._base, 2, lane.actions.ctypes.data, 4, layout,
                           lane.inputs.ctypes.data, 0, 200_000, None, None)
        sx, sy, buttons = decode_action(action)
        assert srv.recv(256) == P.pack_cmd(11, 77, 100, 6, sx, sy, buttons, 0, 4)
        assert (c.status, c.skipped, c.tick, c.seq, c.cmd_seq) == (F.BPV_DONE, 5, 104, 11, 6)
        assert lane.clients[1].status == F.BPV_IDLE
        assert bytes(c.snap) == good
        assert np.array_equal(lane.inputs[0], build_input(good, 0, layout, (sx, sy, buttons)))
        # nothing answers the next step: PENDING after the budget, nothing read
        lane._lib.bpv_step(lane._base, 2, lane.actions.ctypes.data, 4, layout,
                           lane.inputs.ctypes.data, 0, 20_000, None, None)
        assert c.status == F.BPV_PENDING and c.tick == 104
    finally:
        me.close()
        srv.close()


def _scripted(obs: np.ndarray) -> np.ndarray:
    """A callable opponent (what frozen league members are): acts on its own input."""
    return np.tanh(3.0 * obs[:6]).astype(np.float32)


def _vec(group: ServerGroup, lane: bool, n: int = 4, lane_batch: int = int(C.BP_BATCH_MAX),
         **kw: Any) -> BrawlpitVecEnv:
    def make(i: int) -> BrawlpitEnv:
        opp: Any = "cpu:3" if i % 2 == 0 else _scripted
        return BrawlpitEnv(opponent=opp, reward=make_reward("tiered"), server=group.server_for(i),
                           seed=100 + i, **{"max_episode_steps": 150, **kw})
    v = BrawlpitVecEnv([functools.partial(make, i) for i in range(n)], fast_lane=lane,
                       lane_batch=lane_batch)
    v.seed(7)
    return v


def _same_steps(a: BrawlpitVecEnv, b: BrawlpitVecEnv, steps: int, seed: int = 0) -> int:
    """Step both with the same actions; every output equal; episodes ended."""
    assert np.array_equal(a.reset(), b.reset())
    rng = np.random.default_rng(seed)
    ended = 0
    for k in range(steps):
        act = rng.uniform(-1, 1, (a.num_envs, 6)).astype(np.float32)
        oa, ra, da, ia = a.step(act)
        ob, rb, db, ib = b.step(act)
        assert np.array_equal(oa, ob), k
        assert np.array_equal(ra, rb) and np.array_equal(da, db), k
        for i, (x, y) in enumerate(zip(ia, ib, strict=True)):
            tx, ty = x.pop("terminal_observation", None), y.pop("terminal_observation", None)
            assert (tx is None) == (ty is None) and (tx is None or np.array_equal(tx, ty)), k
            if not x and not da[i]:
                continue  # a batched step's infos are empty but where an episode ended
            assert x == y, k
        ended += int(da.sum())
    return ended


@pytest.mark.servers
@pytest.mark.parametrize("kw", [{}, {"input_layout": INPUT_LAYOUT_OBS, "action_repeat": 2},
                                {"lane_batch": 0}, {"lane_batch": 3, "servers": 2}])
def test_lane_steps_exactly_like_the_python_path(kw: dict[str, Any]) -> None:
    """CPU and callable opponents, step limits and auto-resets: bit-identical outputs —
    with the lane's commands in BATCHes (the default; 3 per BATCH over two servers: several
    datagrams and sockets per step) and each from its own socket (``lane_batch=0``)."""
    servers, kw = kw.get("servers", 0), {k: v for k, v in kw.items() if k != "servers"}
    with ServerGroup(8, servers=servers) as group, closing(_vec(group, True, **kw)) as a, \
            closing(_vec(group, False, **kw)) as b:
        assert b.lane is None
        ended = _same_steps(a, b, 700)
        assert ended >= 8  # the step limit ended episodes, and the lane took them up again
        assert a.lane.steps == 700 and a.lane.fallbacks == 0
        sent, items = a.lane.batch.sent, a.lane.batch.items
        if kw.get("lane_batch") == 0:
            assert sent == items == 0
        else:  # every answer came in a BATCH_SNAP: 2 CPU arenas (1 client), 2 with 2 clients
            assert items == 6 * 700
            assert sent >= 700 * (2 if kw.get("lane_batch") == 3 else 1)
            handled = sum(srv.stats()["batch_items"] for srv in group.servers)
            assert handled == 6 * 700 + a.lane.resends


@pytest.mark.servers
def test_envs_the_lane_cannot_step_go_the_python_way() -> None:
    """One env with input delay (not lane work) beside lane envs: still identical."""
    group = ServerGroup(4)

    def vec(lane: bool) -> BrawlpitVecEnv:
        fns = [functools.partial(BrawlpitEnv, opponent="cpu:2", server=group.server_for(i),
                                 seed=5 + i, input_delay=2 if i == 1 else 0) for i in range(2)]
        v = BrawlpitVecEnv(fns, fast_lane=lane)
        v.seed(3)
        return v

    a, b = vec(True), vec(False)
    try:
        _same_steps(a, b, 200)
        assert a.lane.loaded == [True, False]
    finally:
        a.close()
        b.close()
        group.close()


@pytest.mark.servers
def test_a_lost_cmd_is_resent_by_the_lane(server_factory: Any) -> None:
    """The lane's CMD is dropped once: its budget runs out, the batched step re-sends the
    lane's packet, and the step ends as if nothing had happened."""
    srv = server_factory(mode="lockstep")
    cmds = {"n": 0}

    def drop_tenth_cmd(data: bytes) -> bool:  # a lone CMD or the lane's BATCH of one
        if data[3] in (C.BP_PKT_CMD, C.BP_PKT_BATCH):
            cmds["n"] += 1
            return cmds["n"] == 10
        return False

    proxy = LossyProxy(srv.address, drop_tenth_cmd)
    ref_group = ServerGroup(1)
    lossy = BrawlpitVecEnv([lambda: BrawlpitEnv(opponent="cpu:4", server_address=proxy.address,
                                                seed=9)])
    ref = BrawlpitVecEnv([lambda: BrawlpitEnv(opponent="cpu:4", server=ref_group.server_for(0),
                                              seed=9)], fast_lane=False)
    try:
        lossy.seed(1)
        ref.seed(1)
        _same_steps(lossy, ref, 30)
        # the batched step re-sends the lost command itself: no step leaves the lane
        assert proxy.dropped == 1 and lossy.lane.resends >= 1 and lossy.lane.fallbacks == 0
        assert lossy.lane.loaded == [True]  # back in the lane after the slow step
    finally:
        lossy.close()
        ref.close()
        ref_group.close()
        proxy.close()


@pytest.mark.servers
def test_a_dead_server_is_reported_not_hung() -> None:
    group = ServerGroup(2)
    v = BrawlpitVecEnv([functools.partial(BrawlpitEnv, server=group.server_for(i), recv_timeout=2.0)
                        for i in range(2)])
    try:
        v.reset()
        v.step(np.zeros((2, 6), np.float32))
        group.servers[0].proc.kill()
        with pytest.raises(EnvError, match="died"):
            v.step(np.zeros((2, 6), np.float32))
    finally:
        v.close()
        group.close()
