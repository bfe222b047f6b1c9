"""``python -m brawlkit bench env``: what do real packets cost?

Measured side by side in one run, with the same random actions:

* ``udp_lockstep``: BrawlpitEnv over UDP against a lockstep server (CPU level 3),
  the server busy-polling between steps as it does when a core is spare
  (``spin_rule``); ``udp_lockstep_nospin``: the same with a server that
  blocks (what it does when every core is busy).
* ``udp_fastforward``: the same against a free-running server (``--speed``).
* ``inprocess``: the same simulation through ``libbrawlpit.so`` (ctypes), the
  same snapshot bytes and the same Python policy-input builder — no sockets.
* ``udp_arenas8``: 8 lockstep envs that are arenas of ONE server process, stepped
  by the vec env as training steps them (``BrawlpitVecEnv.step_all``: its fast lane
  sends all 8 commands, receives the 8 snapshots and builds the 8 policy inputs in one
  C call; each env's snapshot parse, reward and info in Python), against
  ``inprocess8``: 8 in-process matches stepped by the same loop — per match a ctypes
  step, then the 8 inputs built by the same C builder in one call, then each parse,
  reward and info the same way.  Both sides do the same work but for how a step
  reaches the simulation, so the headline of the arena server,
  ``ratio_udp_arenas8_vs_inprocess`` (>= 0.7), is what the sockets and the server
  process cost.  ``udp_arenas8_python`` / ``inprocess8_python`` keep the earlier
  all-Python loop on both sides (decode, send, receive, parse, Python input
  builder), for comparison.

The headline is ``ratio_udp_lockstep_vs_inprocess`` (>= 0.5 means the UDP path
costs no more than the simulation and observation themselves).  Absolute
rates on shared machines are noise; ratios measured in the same run are not
(docs/benchmarks.md).  ``--profile`` adds a cProfile of the UDP loop: where
its time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import os
import pstats
import time
from typing import Any

import numpy as np

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.env import BrawlpitEnv
from brawlkit.env.actions import ACT_DIM, decode_action
from brawlkit.env.brawlpit import step_info
from brawlkit.env.fastlane import BpCommand, build_inputs
from brawlkit.env.observation import INPUT_LAYOUT, INPUT_LAYOUTS, build_input
from brawlkit.env.rewards import OutcomeReward, match_outcome
from brawlkit.env.vecenv import BrawlpitVecEnv
from brawlkit.wire.protocol import parse_snapshot
from brawlkit.wire.server_process import ServerGroup, spin_rule
from brawlkit.wire.sim import InProcessMatch


def _actions(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, ACT_DIM)).astype(np.float32)


def bench_udp(mode: str, steps: int, seed: int, speed: float = 200.0,
              profile: bool = False, spin_us: int = 0) -> tuple[float, str]:
    acts = _actions(steps, seed)
    env = BrawlpitEnv(mode=mode, opponent="cpu:3", speed=speed, seed=seed, server_spin_us=spin_us)
    try:
        env.reset(seed=seed)
        for a in acts[:50]:  # warm-up
            if env.step(a)[2]:
                env.reset()
        prof = cProfile.Profile() if profile else None
        t0 = time.perf_counter()
        if prof:
            prof.enable()
        for a in acts:
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                env.reset()
        if prof:
            prof.disable()
        dt = time.perf_counter() - t0
    finally:
        env.close()
    text = ""
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
        text = buf.getvalue()
    return steps / dt, text


def bench_parts(n: int = 5000, seed: int = 0) -> dict[str, float]:
    """Where one lockstep UDP step's time goes, part by part (µs each).

    ``round_trip``: a CMD re-sent to a lockstep server (a duplicate, answered
    at once with the current snapshot) and its answer received — the pure
    transport + server wake-up cost, no simulation.  ``parse`` and
    ``observation``: decoding the 92 bytes and building the 31 values.
    """
    env = BrawlpitEnv(mode="lockstep", opponent="cpu:3", seed=seed,
                      server_spin_us=0)  # blocking server: the worst case
    try:
        env.reset(seed=seed)
        for a in _actions(20, seed):
            env.step(a)
        me = env._me
        assert me is not None and env.last_snapshot is not None
        pkt = me.last_cmds[0]
        t0 = time.perf_counter()
        for _ in range(n):
            me.send(pkt)
            while me.recv_nowait() is None:
                pass
        rt = (time.perf_counter() - t0) / n * 1e6
        raw = env.last_snapshot.raw
        t0 = time.perf_counter()
        for _ in range(n):
            parse_snapshot(raw)
        parse_us = (time.perf_counter() - t0) / n * 1e6
        snap = parse_snapshot(raw)
        t0 = time.perf_counter()
        for _ in range(n):
            build_input(snap, 0, INPUT_LAYOUT)
        obs_us = (time.perf_counter() - t0) / n * 1e6
    finally:
        env.close()
    return {"round_trip_us": round(rt, 2), "parse_us": round(parse_us, 2),
            "observation_us": round(obs_us, 2)}


#: envs on one server for the arena measurement
ARENAS = 8


def bench_inprocess(steps: int, seed: int, repeat: int = 4) -> float:
    """The reference: the same simulation in-process, the same snapshot bytes parsed, the
    same policy input built (the env's default layout, with the previous command)."""
    return bench_inprocess_many(1, steps, seed, repeat)


def bench_inprocess_lane_like(n: int, steps: int, seed: int, repeat: int = 4) -> float:
    """Env-steps/s of ``n`` in-process matches stepped as the vec env's lane steps its
    arenas: the inputs of all ``n`` built in one C call, each snapshot parsed, rewarded
    (:class:`~brawlkit.env.rewards.OutcomeReward`, the env's default) and described in an
    info dict like the env's."""

    acts = _actions(steps, seed)
    ms = [InProcessMatch(cpu_level=3, seed=seed + i) for i in range(n)]
    rewards = [OutcomeReward() for _ in range(n)]
    prev_snaps = [parse_snapshot(m.snapshot()) for m in ms]
    slots = np.zeros(n, np.int32)
    cmds = (BpCommand * n)()
    out = np.zeros((n, INPUT_LAYOUTS[INPUT_LAYOUT]), np.float32)
    try:
        t0 = time.perf_counter()
        for k in range(0, steps, n):
            raws, infos = [], []
            for i, m in enumerate(ms):
                cmd = decode_action(acts[(k + i) % steps])
                cmds[i].stick_x, cmds[i].stick_y, cmds[i].buttons = cmd
                raws.append(m.step(*cmd, repeat))
            build_inputs(b"".join(raws), slots, cmds, INPUT_LAYOUT, out)
            for i, m in enumerate(ms):
                snap, prev = parse_snapshot(raws[i]), prev_snaps[i]
                r, tiers = rewards[i](prev, snap, 0, snap.tick - prev.tick, acts[(k + i) % steps])
                infos.append(step_info(snap, snap.tick - prev.tick, match_outcome(snap, 0), tiers,
                                       "cpu:3"))
                prev_snaps[i] = snap
                if m.over:
                    prev_snaps[i] = parse_snapshot(m.reset(seed + i))
        return (len(range(0, steps, n)) * n) / (time.perf_counter() - t0)
    finally:
        for m in ms:
            m.close()


def bench_inprocess_many(n: int, steps: int, seed: int, repeat: int = 4) -> float:
    """Env-steps/s of ``n`` in-process matches stepped round-robin by one Python loop."""
    acts = _actions(steps, seed)
    ms = [InProcessMatch(cpu_level=3, seed=seed + i) for i in range(n)]
    try:
        t0 = time.perf_counter()
        for k in range(0, steps, n):
            for i, m in enumerate(ms):
                cmd = decode_action(acts[(k + i) % steps])
                snap = parse_snapshot(m.step(*cmd, repeat))
                build_input(snap, 0, INPUT_LAYOUT, cmd)
                if m.over:
                    m.reset(seed + i)
        return (len(range(0, steps, n)) * n) / (time.perf_counter() - t0)
    finally:
        for m in ms:
            m.close()


def bench_arenas_vec(n: int, steps: int, seed: int) -> float:
    """Env-steps/s of ``n`` lockstep envs that are arenas of ONE server process, stepped by
    :meth:`BrawlpitVecEnv.step_all` (the fast lane) as training steps them."""

    acts = _actions(steps, seed)
    group = ServerGroup(n, servers=1)
    venv = BrawlpitVecEnv([functools.partial(BrawlpitEnv, opponent="cpu:3", seed=seed + i,
                                             server=group.server_for(i)) for i in range(n)])
    try:
        for i, e in enumerate(venv.envs):
            e.reset(seed=seed + i)
        rounds = range(0, steps, n)
        idx = np.arange(n)
        t0 = time.perf_counter()
        for k in rounds:
            for i, res in enumerate(venv.step_all(acts[(k + idx) % steps])):
                if res[2]:
                    venv.envs[i].reset(seed=seed + i)
        return (len(rounds) * n) / (time.perf_counter() - t0)
    finally:
        venv.close()
        group.close()


def bench_arenas(n: int, steps: int, seed: int) -> float:
    """Env-steps/s of ``n`` lockstep envs that are arenas of ONE server process, stepped
    env by env in Python: all ``n`` commands sent before any snapshot is read."""
    acts = _actions(steps, seed)
    group = ServerGroup(n, servers=1)
    envs = [BrawlpitEnv(opponent="cpu:3", seed=seed + i, server=group.server_for(i))
            for i in range(n)]
    try:
        for i, e in enumerate(envs):
            e.reset(seed=seed + i)
        rounds = range(0, steps, n)
        t0 = time.perf_counter()
        for k in rounds:
            for i, e in enumerate(envs):
                e.step_send(acts[(k + i) % steps])
            for i, e in enumerate(envs):
                if e.step_recv()[2]:
                    e.reset(seed=seed + i)
        return (len(rounds) * n) / (time.perf_counter() - t0)
    finally:
        for e in envs:
            e.close()
        group.close()


def run(steps: int = 5000, seed: int = 0, profile: bool = False,
        ff_speed: float = 200.0) -> dict[str, Any]:
    spin = spin_rule(1)
    inproc = bench_inprocess(steps, seed)
    lock, prof_text = bench_udp("lockstep", steps, seed, spin_us=spin)
    lock_block, _ = bench_udp("lockstep", steps, seed, spin_us=0)
    ff, _ = bench_udp("fastforward", steps, seed, speed=ff_speed)
    if profile:
        _, prof_text = bench_udp("lockstep", min(steps, 3000), seed, profile=True, spin_us=spin)
    parts = bench_parts(min(steps, 5000), seed)
    arenas8 = bench_arenas_vec(ARENAS, steps, seed)
    inproc8 = bench_inprocess_lane_like(ARENAS, steps, seed)
    arenas8_py = bench_arenas(ARENAS, steps, seed)
    inproc8_py = bench_inprocess_many(ARENAS, steps, seed)
    return {
        "arenas": ARENAS,
        "udp_arenas8_steps_per_s": round(arenas8, 1),
        "inprocess8_steps_per_s": round(inproc8, 1),
        "udp_arenas8_us_per_env_step": round(1e6 / arenas8, 1),
        "inprocess8_us_per_env_step": round(1e6 / inproc8, 1),
        "ratio_udp_arenas8_vs_inprocess": round(arenas8 / inproc8, 3),
        "udp_arenas8_python_us_per_env_step": round(1e6 / arenas8_py, 1),
        "inprocess8_python_us_per_env_step": round(1e6 / inproc8_py, 1),
        "ratio_udp_arenas8_python_vs_inprocess": round(arenas8_py / inproc8_py, 3),
        "steps": steps,
        "fastforward_speed": ff_speed,
        "udp_lockstep_steps_per_s": round(lock, 1),
        "udp_fastforward_steps_per_s": round(ff, 1),
        "server_spin_us": spin,
        "udp_lockstep_nospin_steps_per_s": round(lock_block, 1),
        "ratio_udp_lockstep_nospin_vs_inprocess": round(lock_block / inproc, 3),
        "inprocess_steps_per_s": round(inproc, 1),
        "ratio_udp_lockstep_vs_inprocess": round(lock / inproc, 3),
        "ratio_udp_fastforward_vs_inprocess": round(ff / inproc, 3),
        "udp_lockstep_us_per_step": round(1e6 / lock, 1),
        "inprocess_us_per_step": round(1e6 / inproc, 1),
        "parts_us": parts,
        "profile": prof_text,
    }


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("bench env", __doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5000, help="env steps per measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ff-speed", type=float, default=200.0,
                    help="fastforward server speed (x real time); far above what the client "
                         "can drain, the server floods it and both slow down")
    ap.add_argument("--profile", action="store_true",
                    help="also print a cProfile of the UDP lockstep loop (before the JSON line)")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    if args.steps < 100:
        ap.error("--steps must be >= 100 for a meaningful rate")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res = run(args.steps, args.seed, profile=args.profile, ff_speed=args.ff_speed)
    prof = res.pop("profile")
    print(f"{'path':<28}{'steps/s':>12}{'us/step':>10}")
    for key in ("inprocess", "udp_lockstep", "udp_lockstep_nospin", "udp_fastforward"):
        rate = res[f"{key}_steps_per_s"]
        print(f"{key:<28}{rate:>12.0f}{1e6 / rate:>10.1f}")
    print(f"ratio udp_lockstep / inprocess = {res['ratio_udp_lockstep_vs_inprocess']:.3f} "
          f"(target >= 0.5; server --spin-us {res['server_spin_us']}, as training sets it "
          f"when a core is spare); without spin {res['ratio_udp_lockstep_nospin_vs_inprocess']:.3f}")
    print(f"8 envs as arenas of one server: {res['udp_arenas8_us_per_env_step']:.1f} us per env "
          f"step vs 8 in-process simulations {res['inprocess8_us_per_env_step']:.1f} us -> ratio "
          f"{res['ratio_udp_arenas8_vs_inprocess']:.3f} (target >= 0.7)")
    parts = res["parts_us"]
    print(f"\nparts of a UDP lockstep step (us): transport round trip {parts['round_trip_us']:.1f} "
          f"(send + server wake-up + recv, no simulation), parse {parts['parse_us']:.1f}, "
          f"observation {parts['observation_us']:.1f}")
    if prof:
        print("\nwhere the UDP lockstep loop spends its time (cProfile, by own time):")
        print("\n".join(prof.strip().splitlines()[:30]))
    if args.json:
        print(json.dumps(res))
    return 0
