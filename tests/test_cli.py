"""`python -m brawlkit ...` as a user runs it: routing, --json contracts, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def brawlkit(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "brawlkit", *args], capture_output=True,
                          text=True, timeout=timeout)


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_help_lists_every_command() -> None:
    r = brawlkit("--help")
    assert r.returncode == 0
    for cmd in ("train", "eval", "export", "parity", "parena", "cputable", "bench"):
        assert cmd in r.stdout


def test_unknown_command_and_bench_target_are_usage_errors() -> None:
    r = brawlkit("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    r = brawlkit("bench", "gpu")
    assert r.returncode == 2 and "env|native|train" in r.stderr


def test_bench_env_json() -> None:
    r = brawlkit("bench", "env", "--steps", "400", "--no-profile", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    for key in ("udp_lockstep_steps_per_s", "udp_fastforward_steps_per_s",
                "inprocess_steps_per_s", "ratio_udp_lockstep_vs_inprocess"):
        assert res[key] > 0, key
    assert res["ratio_udp_lockstep_vs_inprocess"] == pytest.approx(
        res["udp_lockstep_steps_per_s"] / res["inprocess_steps_per_s"], rel=0.01)
    assert res["parts_us"]["round_trip_us"] > 0


def test_bench_native_json() -> None:
    r = brawlkit("bench", "native", "--calls", "2000", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    for key in ("c_ns_per_forward", "numpy_ns_per_forward", "torch_ns_per_forward", "torch_vs_c"):
        assert res[key] > 0, key
    assert res["parity_c_vs_torch"] <= 1e-5


def test_bench_train_json_small() -> None:
    r = brawlkit("bench", "train", "--steps", "512", "--n-envs", "1", "--no-subproc",
                 "--no-profile", "--json")
    assert r.returncode == 0, r.stderr
    row = last_json(r.stdout)["n_envs"]["1"]
    assert row["brawlpit_steps_per_s"] > 0 and row["dummy_steps_per_s"] > 0
    assert row["ratio"] == pytest.approx(row["brawlpit_steps_per_s"] / row["dummy_steps_per_s"],
                                         rel=0.01)


def test_parity_json() -> None:
    r = brawlkit("parity", "--states", "500", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["states"] >= 500 and res["max_abs_diff"] <= 1e-6 and res["posture_mismatches"] == 0


def test_cputable_json() -> None:
    r = brawlkit("cputable", "--games", "6", "--adjacent", "--json")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout.strip().splitlines()[-1])
