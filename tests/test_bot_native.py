"""brawlpit_bot (C, zero Python) plays a whole lockstep match against the CPU; the
observations it built are replayed through the Python policy of the same blob and
the decoded actions must agree on >= 99% of steps (buttons exactly, sticks within
1e-5; in practice all)."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from _bpw_fixtures import NATIVE, make_trained_like_checkpoint

from brawlkit import export as ex


@pytest.fixture(scope="module")
def binaries():
    subprocess.run(["make", "-s", "-C", str(NATIVE), "-f", "policy.mk", "build/brawlpit_bot"],
                   check=True)
    server = NATIVE / "build" / "brawlpit_server"
    if not server.exists():
        subprocess.run(["make", "-s", "-C", str(NATIVE), "build/brawlpit_server"], check=True)
    return NATIVE / "build" / "brawlpit_bot", server


def play_one_lockstep_match(bot, server, blob, trace, seed: int, level: int):
    """brawlpit_bot plays one lockstep match vs CPU ``level`` on a fresh server;
    returns (winner, ticks) from its result line, with the per-step trace in ``trace``."""
    srv = subprocess.Popen([str(server), "--port", "0", "--mode", "lockstep", "--cpu-level",
                            str(level), "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline().split()[1])
        r = subprocess.run([str(bot), "--server", f"127.0.0.1:{port}", "--weights", str(blob),
                            "--matches", "1", "--seed", str(seed), "--cpu-level", str(level),
                            "--trace", str(trace)],
                           capture_output=True, text=True, timeout=120)
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"match (\d+) winner (\d+) ticks (\d+)\n", r.stdout)
    assert m, r.stdout
    return int(m.group(2)), int(m.group(3))


def test_bot_plays_lockstep_match(binaries, tmp_path):
    bot, server = binaries
    make_trained_like_checkpoint(tmp_path / "ppo.zip", seed=4)
    ex.export_checkpoint(tmp_path / "ppo.zip", tmp_path / "p.bpw", compress="shuffle")
    winner, ticks = play_one_lockstep_match(bot, server, tmp_path / "p.bpw",
                                            tmp_path / "trace.txt", seed=7, level=3)
    assert winner in (0, 1, 2) and 0 < ticks <= 9000
    rows = np.loadtxt(tmp_path / "trace.txt", ndmin=2)
    assert len(rows) > 10
    assert np.all(np.diff(rows[:, 1]) == 4)  # lockstep, repeat 4, no skipped step
    pol = ex.NumpyPolicy(tmp_path / "p.bpw")
    acts = pol.act(rows[:, 5:].astype(np.float32))
    # same action = same buttons and sticks within the forward-pass parity bound
    # (C and numpy sum in different orders, so sticks may differ in the last bits)
    same = []
    for a, r in zip(acts, rows, strict=True):
        sx, sy, b = ex.decode_action(a)
        same.append(b == int(r[4]) and abs(sx - r[2]) <= 1e-5 and abs(sy - r[3]) <= 1e-5)
    assert np.mean(same) >= 0.99, np.mean(same)


def test_c_bot_and_python_policy_play_the_same_match(binaries, tmp_path):
    """The proof that the live game runs what was trained: the same checkpoint,
    once as SB3/torch in BrawlpitEnv and once as brawlpit_bot (C, zero Python),
    in lockstep against the same CPU with the same seed, plays the same match."""
    import os

    from stable_baselines3 import PPO

    from brawlkit.env import BrawlpitEnv

    bot, server = binaries
    # BRAWLKIT_E2E_CHECKPOINT=runs/main/.../gen_XXXX.zip runs this on a trained policy
    # (full-length matches); CI has none, so by default a large-weight random actor
    ckpt = os.environ.get("BRAWLKIT_E2E_CHECKPOINT")
    if ckpt is None:
        ckpt = str(tmp_path / "ppo.zip")
        make_trained_like_checkpoint(tmp_path / "ppo.zip", seed=11)
    ex.export_checkpoint(ckpt, tmp_path / "p.bpw", compress="auto")
    seed, level = 21, 3

    model = PPO.load(ckpt, device="cpu")
    env = BrawlpitEnv(mode="lockstep", action_repeat=4, opponent=f"cpu:{level}")
    py_steps = []
    try:
        obs, _ = env.reset(seed=seed)
        while True:
            tick = env.last_snapshot.tick
            action, _ = model.predict(obs, deterministic=True)
            py_steps.append((tick, *ex.decode_action(action)))
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        py_winner, py_ticks = env.last_snapshot.winner, env.last_snapshot.tick
    finally:
        env.close()

    c_winner, c_ticks = play_one_lockstep_match(bot, server, tmp_path / "p.bpw",
                                                tmp_path / "trace.txt", seed=seed, level=level)
    rows = np.loadtxt(tmp_path / "trace.txt", ndmin=2)
    c_steps = [(int(row[1]), float(row[2]), float(row[3]), int(row[4])) for row in rows]

    n = min(len(py_steps), len(c_steps))
    same = sum(
        1 for (pt, psx, psy, pb), (ct, csx, csy, cb) in zip(py_steps[:n], c_steps[:n], strict=True)
        if pt == ct and pb == cb and abs(psx - csx) <= 1e-5 and abs(psy - csy) <= 1e-5
    )
    frac = same / max(len(py_steps), len(c_steps))
    print(f"C bot vs Python policy: {same}/{max(len(py_steps), len(c_steps))} steps identical "
          f"({frac:.4f}); winner py={py_winner} c={c_winner}; ticks py={py_ticks} c={c_ticks}")
    assert frac >= 0.99
    assert c_winner == py_winner and c_ticks == py_ticks


def _constant_blob(stick_x: float) -> bytes:
    """A valid 31-64-64-6 blob whose output is the constant (stick_x, 0, no buttons)."""
    z = np.zeros
    head_bias = np.array([stick_x, 0, -1, -1, -1, -1], dtype=np.float32)
    return ex.pack_bpw([
        ex.Layer(z((64, 31), np.float32), z(64, np.float32), ex.ACT_TANH),
        ex.Layer(z((64, 64), np.float32), z(64, np.float32), ex.ACT_TANH),
        ex.Layer(z((6, 64), np.float32), head_bias, ex.ACT_NONE),
    ])


def test_bot_reloads_weights_on_sighup_and_keeps_old_ones_if_refused(binaries, tmp_path):
    """A new checkpoint replaces the old one with no restart: SIGHUP reloads; a corrupt
    file is refused with a message and the bot plays on with the previous weights."""
    import signal
    import time

    bot, server = binaries
    weights = tmp_path / "live.bpw"
    weights.write_bytes(_constant_blob(-0.5))
    trace = tmp_path / "trace.txt"
    srv = subprocess.Popen([str(server), "--port", "0", "--mode", "realtime", "--cpu-level", "1",
                            "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline().split()[1])
        b = subprocess.Popen([str(bot), "--server", f"127.0.0.1:{port}", "--weights", str(weights),
                              "--matches", "1", "--seed", "3", "--trace", str(trace)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.6)
        weights.write_bytes(b"BPW1 this is not a policy")
        b.send_signal(signal.SIGHUP)
        time.sleep(0.4)
        weights.write_bytes(ex.encode_blob(_constant_blob(0.5), "lz4"))
        b.send_signal(signal.SIGHUP)
        time.sleep(0.6)
        b.send_signal(signal.SIGTERM)
        _, err = b.communicate(timeout=10)
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    assert "refused" in err and "keeping the previous weights" in err, err
    assert err.count("loaded weights") >= 2, err  # at start and after the second SIGHUP
    sx = np.loadtxt(trace, ndmin=2)[:, 2]
    assert set(np.round(sx, 6)) <= {-0.5, 0.5}
    first_new = int(np.argmax(sx > 0))
    assert sx[0] == -0.5 and first_new > 20  # ~60 Hz for ~1 s on the old weights
    assert np.all(sx[first_new:] == 0.5) and np.all(sx[:first_new] == -0.5)
