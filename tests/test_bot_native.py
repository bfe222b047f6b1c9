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


def test_bot_plays_lockstep_match(binaries, tmp_path):
    bot, server = binaries
    make_trained_like_checkpoint(tmp_path / "ppo.zip", seed=4)
    ex.export_checkpoint(tmp_path / "ppo.zip", tmp_path / "p.bpw", compress="shuffle")
    srv = subprocess.Popen([str(server), "--port", "0", "--mode", "lockstep", "--cpu-level", "3",
                            "--quiet"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(srv.stdout.readline().split()[1])
        r = subprocess.run([str(bot), "--server", f"127.0.0.1:{port}", "--weights",
                            str(tmp_path / "p.bpw"), "--matches", "1", "--seed", "7",
                            "--cpu-level", "3", "--trace", str(tmp_path / "trace.txt")],
                           capture_output=True, text=True, timeout=120)
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    assert r.returncode == 0, r.stderr
    m = re.fullmatch(r"match (\d+) winner (\d+) ticks (\d+)\n", r.stdout)
    assert m and int(m.group(2)) in (0, 1, 2) and 0 < int(m.group(3)) <= 9000
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
