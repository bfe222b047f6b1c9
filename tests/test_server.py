"""The server launcher: ports, readiness, clean-up, clear errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from brawlkit.server import ServerError, ServerProcess, native_binary, parse_stats_line


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie still answers kill(0); check its state
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_missing_binary_says_how_to_build(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("BRAWLKIT_NATIVE_BUILD", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="make build"):
        native_binary("brawlpit_server")


def test_server_reports_port_and_stats() -> None:
    with ServerProcess(mode="lockstep", cpu_level=2) as srv:
        host, port = srv.address
        assert host == "127.0.0.1" and 1024 <= port < 65536
        stats = srv.stats()
        assert "dropped" in stats and "rx" in stats
    assert not srv.alive()


def test_bad_arguments_fail_with_the_log_tail() -> None:
    srv = ServerProcess(mode="lockstep", extra_args=["--no-such-flag"])
    with pytest.raises(ServerError, match="exited with code"):
        srv.wait_ready()


def test_no_orphan_survives_a_killed_python_process(tmp_path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from brawlkit.env import BrawlpitEnv
        env = BrawlpitEnv(opponent="cpu:1")
        env.reset(seed=0)
        print(env.server.pid, flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        server_pid = int(line)
        os.kill(server_pid, 0)  # alive while its parent lives
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert _gone(server_pid), "brawlpit_server outlived its killed parent"
    finally:
        if child.poll() is None:
            child.kill()


def test_parse_stats_line() -> None:
    text = "noise\nstats rx=10 tx=4 dropped=6 bad_len=2 bad_magic=4\n"
    assert parse_stats_line(text) == {"rx": 10, "tx": 4, "dropped": 6, "bad_len": 2, "bad_magic": 4}
    with pytest.raises(ValueError):
        parse_stats_line("nothing here")


def test_auto_spin_leaves_the_trainer_a_core(monkeypatch) -> None:
    from brawlkit.server import DEFAULT_SPIN_US, auto_spin_us

    monkeypatch.delenv("BRAWLKIT_SERVER_SPIN_US", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert auto_spin_us(cores) == 0
    assert auto_spin_us(cores - 1) == (DEFAULT_SPIN_US if cores > 1 else 0)
    monkeypatch.setenv("BRAWLKIT_SERVER_SPIN_US", "0")
    assert auto_spin_us(0) == 0


def test_spinning_server_plays_the_same_match() -> None:
    import numpy as np

    from brawlkit.env import BrawlpitEnv

    def rollout(spin: int) -> list:
        env = BrawlpitEnv(opponent="cpu:4", server_spin_us=spin)
        rng = np.random.default_rng(3)
        try:
            obs, _ = env.reset(seed=9)
            out = [obs]
            for _ in range(300):
                obs, _, term, _, _ = env.step(rng.uniform(-1, 1, 6).astype(np.float32))
                out.append(obs)
                if term:
                    break
            assert "--spin-us" in env.server.args if spin else True
            return out
        finally:
            env.close()

    a, b = rollout(0), rollout(500)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
