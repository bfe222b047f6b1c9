"""`python -m brawlkit ...` as a user runs it: routing, --json contracts, errors."""

from __future__ import annotations

import json

import pytest
from helpers import last_json
from helpers import run_cli as brawlkit


def test_help_lists_every_command() -> None:
    r = brawlkit("--help")
    assert r.returncode == 0
    for cmd in ("train", "eval", "export", "league", "elo", "parity", "parena", "cputable", "bench"):
        assert cmd in r.stdout


def test_unknown_command_and_bench_target_are_usage_errors() -> None:
    r = brawlkit("frobnicate")
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    r = brawlkit("bench", "gpu")
    assert r.returncode == 2 and "env|learn|native|train" in r.stderr


@pytest.mark.servers
def test_bench_env_json() -> None:
    r = brawlkit("bench", "env", "--steps", "400", "--json")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().splitlines()) < 15, "profiler output only with --profile"
    res = last_json(r.stdout)
    for key in ("udp_lockstep_steps_per_s", "udp_fastforward_steps_per_s",
                "inprocess_steps_per_s", "ratio_udp_lockstep_vs_inprocess"):
        assert res[key] > 0, key
    # the ratio is rounded to 3 decimals (a loaded machine can make it small)
    assert res["ratio_udp_lockstep_vs_inprocess"] == pytest.approx(
        res["udp_lockstep_steps_per_s"] / res["inprocess_steps_per_s"], abs=6e-4)
    assert res["parts_us"]["round_trip_us"] > 0
    for key in ("ratio_udp_arenas8_vs_inprocess", "ratio_udp_arenas8_python_vs_inprocess"):
        assert res[key] > 0, key


def test_bench_native_json() -> None:
    r = brawlkit("bench", "native", "--calls", "2000", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    for key in ("c_ns_per_forward", "numpy_ns_per_forward", "torch_ns_per_forward", "torch_vs_c"):
        assert res[key] > 0, key
    assert res["parity_c_vs_torch"] <= 1e-5


@pytest.mark.servers
@pytest.mark.training
def test_bench_train_json_small() -> None:
    r = brawlkit("bench", "train", "--steps", "512", "--widths", "1", "--no-subproc",
                 "--no-profile", "--repeats", "2", "--json")
    assert r.returncode == 0, r.stderr
    row = last_json(r.stdout)["n_envs"]["1"]
    assert row["brawlpit_steps_per_s"] > 0 and row["dummy_steps_per_s"] > 0
    assert len(row["brawlpit_runs"]) == len(row["dummy_runs"]) == 2
    assert row["brawlpit_steps_per_s"] == max(row["brawlpit_runs"])  # the best of the runs
    assert row["ratio"] == pytest.approx(row["brawlpit_steps_per_s"] / row["dummy_steps_per_s"],
                                         abs=6e-4)  # rounded to 3 decimals


@pytest.mark.servers
@pytest.mark.training
def test_bench_train_headline_measures_both_update_placements() -> None:
    """The headline through the CLI at a tiny width: the real loop (league Main, KL,
    evaluation) with the update in its own process, and beside it the same loop and the
    zero-cost env with the update after the rollout; each ratio is against the zero-cost
    env run the same way, and no step left the fast lane."""
    r = brawlkit("bench", "train", "--steps", "1024", "--n-envs", "4", "--n-steps", "128",
                 "--batch-size", "256", "--n-epochs", "1", "--async-update", "--no-busy", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["async_update"] is True and res["other_update"]["async_update"] is False
    for part in (res, res["other_update"]):
        assert part["real"]["steps"] >= 1024 and part["real"]["eval_matches"] > 0
        assert part["ratio_vs_zero_cost"] == pytest.approx(
            part["real"]["steps_per_s"] / part["zero_cost"]["steps_per_s"], abs=6e-4)
    assert res["lane_fallbacks"] == 0 and "busy_adaptive" not in res


def test_parity_json() -> None:
    r = brawlkit("parity", "--states", "500", "--json")
    assert r.returncode == 0, r.stderr
    res = last_json(r.stdout)
    assert res["states"] >= 500 and res["max_abs_diff"] <= 1e-6 and res["posture_mismatches"] == 0


def test_every_command_has_help() -> None:
    from brawlkit.cli import BENCHES, COMMANDS

    for argv in [[c] for c in COMMANDS if c != "parena"] + [["bench", b] for b in BENCHES]:
        r = brawlkit(*argv, "--help")
        assert r.returncode == 0 and "usage:" in r.stdout, (argv, r.stderr)


@pytest.mark.parametrize("program", ["brawlpit_server", "brawlpit_bot", "brawlpit_policy",
                                     "brawlpit_cputable", "brawlpit_obs"])
def test_native_programs_print_help_and_refuse_unknown_options(program: str) -> None:
    """``-h``/``--help``: the usage and the options on stdout, exit 0; an unknown option:
    the usage on stderr, exit 2."""
    import subprocess

    from brawlkit.common.paths import native_path

    exe = str(native_path(program))
    for flag in ("--help", "-h"):
        r = subprocess.run([exe, flag], capture_output=True, text=True, timeout=10)
        assert r.returncode == 0 and "usage:" in r.stdout and r.stderr == "", (program, flag, r)
        assert len(r.stdout.splitlines()) >= 4, r.stdout  # more than the usage line
    r = subprocess.run([exe, "--no-such-option"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "usage:" in r.stderr and r.stdout == "", (program, r)


def test_cputable_json() -> None:
    r = brawlkit("cputable", "--games", "6", "--adjacent", "--json")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout.strip().splitlines()[-1])
