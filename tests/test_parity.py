"""C vs Python observation parity, and proof that the check can fail."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, run_cli

from brawlkit.env.observation import OBS_DIM
from brawlkit.tools import parity

NATIVE = ROOT / "native"

def test_parity_10k_states(obs_bin: Path, tmp_path: Path) -> None:
    res = parity.run(states=10_000, seed=7, json_out=tmp_path / "r.json", obs_bin=obs_bin)
    assert res["states"] == 10_000
    assert res["max_abs_diff"] is not None and res["max_abs_diff"] <= 1e-6, res["examples"]
    assert res["posture_mismatches"] == 0
    assert res["ok"]
    assert len(res["per_dim"]) == OBS_DIM
    assert all(v > 0 for v in res["posture_counts"].values()), res["posture_counts"]
    assert json.loads((tmp_path / "r.json").read_text())["states"] == 10_000


def test_edge_cases_are_named_and_cover_the_brief() -> None:
    names = {n for n, *_ in parity.edge_cases()}
    for must in ("both_offstage", "zero_distance", "zero_relative_velocity", "max_damage",
                 "zero_stocks"):
        assert must in names
    assert any(n.startswith("self_x_edge") for n in names)
    assert any(n.startswith("late_") for n in names)
    assert any(n.startswith("kill_percent") for n in names)


def _mutant(cc: list[str], tmp_path: Path, edit) -> Path:
    """Build brawlpit_obs from an edited copy of native/src/obs.c, with the build's flags."""
    src = (NATIVE / "src" / "obs.c").read_text()
    mutated = edit(src)
    assert mutated != src, "mutation did not apply"
    (tmp_path / "obs.c").write_text(mutated)
    shutil.copy(NATIVE / "src" / "obs.h", tmp_path / "obs.h")
    gen = NATIVE / "build" / "gen"
    out = tmp_path / "brawlpit_obs"
    subprocess.run([*cc, f"-I{NATIVE / 'include'}", f"-I{tmp_path}", f"-I{gen}",
                    str(tmp_path / "obs.c"), str(NATIVE / "src" / "obs_tool.c"),
                    str(gen / "commander_mod.c"), "-o", str(out), "-lm"],
                   check=True, capture_output=True, text=True)
    return out


def _drop_dim(n: int):
    def edit(src: str) -> str:
        return re.sub(rf"^\s*out\[{n}\] = [^;]*;\n", "", src, count=1, flags=re.M)
    return edit


def test_unwritten_dimension_is_caught(cc, tmp_path: Path) -> None:
    bad = _mutant(cc, tmp_path, _drop_dim(30))
    res = parity.run(states=2_000, seed=1, obs_bin=bad)
    assert not res["ok"]
    assert res["worst_dim"] == 30 and res["max_abs_diff"] is None  # NaN-filled -> inf
    # ...and through the CLI the way `make check` runs it: exit 1, JSON last line
    r = run_cli("parity", "--states", "500", "--json", "--obs-bin", str(bad))
    assert r.returncode == 1
    last = json.loads(r.stdout.strip().splitlines()[-1])
    assert last["ok"] is False and set(last["layouts"]) == {"1", "2", "3"}
    assert all(lay["worst_dim"] == 30 and not lay["ok"] for lay in last["layouts"].values())
    assert "MISMATCH" in r.stdout


def test_changed_normalisation_is_caught(cc, tmp_path: Path) -> None:
    bad = _mutant(cc, tmp_path, lambda s: s.replace("D(p->vx) / D(BP_OBS_VEL_SCALE)",
                                                "D(p->vx) / (D(BP_OBS_VEL_SCALE) + 1.0)"))
    res = parity.run(states=1_000, seed=2, obs_bin=bad)
    assert not res["ok"] and res["worst_dim"] in (2, 10) and res["max_abs_diff"] > 1e-3


def test_posture_drift_is_caught(cc, tmp_path: Path) -> None:
    """A C posture that disagrees with the .prn (here: rules 3 and 4 swapped in obs.c)."""
    bad = _mutant(cc, tmp_path, lambda s: s.replace("k == posture ?",
                                                "k == (posture == 3 ? 4 : posture) ?"))
    res = parity.run(states=2_000, seed=3, obs_bin=bad)
    assert not res["ok"] and res["posture_mismatches"] > 0
    conf = res["posture_confusion"]
    assert conf[3][4] > 0 and conf[3][3] == 0


def test_obs_tool_rejects_bad_records(obs_bin: Path, tmp_path: Path) -> None:
    good = parity.snapshot_bytes(parity.P(), parity.P(x=5.0), 10)
    bad = bytearray(good)
    bad[0] ^= 0xFF  # magic
    neutral = bytes(12)
    for rec, msg in ((bytes((0, 0, 0, 0)) + bytes(bad) + neutral, "bad magic"),
                     (bytes((2, 0, 0, 0)) + good + neutral, "slot"),
                     (bytes((0, 0, 0, 0)) + good, "truncated")):
        (tmp_path / "in.bin").write_bytes(rec)
        r = subprocess.run([str(obs_bin), str(tmp_path / "in.bin"), str(tmp_path / "o.bin")],
                           capture_output=True, text=True)
        assert r.returncode == 1 and msg in r.stderr, r.stderr


@pytest.mark.parametrize("layout", [2, 3])
def test_policy_input_layouts_2_and_3_parity_10k_states(obs_bin: Path, layout: int) -> None:
    """The layout-2 policy input (observation + previous command + own fighter state +
    both action states), and layout 3 (that + the match clock), are bit-identical in C
    and Python."""
    res = parity.run(states=10_000, seed=11, obs_bin=obs_bin, layout=layout)
    assert res["ok"] and res["max_abs_diff"] == 0.0, res["examples"]
    assert len(res["per_dim"]) == 77 + layout and res["per_dim"][31]["name"] == "prev_stick_x"
    if layout == 3:
        assert res["per_dim"][79]["name"] == "clock"


def test_clock_mutant_is_caught_and_layouts_1_2_are_untouched(cc, tmp_path: Path) -> None:
    """The clock of layout 3 read as the time *gone* instead of the time left (obs.c)."""
    bad = _mutant(cc, tmp_path, lambda s: s.replace(
        "clip(D(ticks_left) / D(BP_MATCH_TICKS)", "clip(1.0 - D(ticks_left) / D(BP_MATCH_TICKS)"))
    res = parity.run(states=2_000, seed=4, obs_bin=bad, layout=3)
    assert not res["ok"] and res["worst_dim_name"] == "clock"
    assert parity.run(states=2_000, seed=4, obs_bin=bad, layout=2)["ok"]


def test_layout_2_mutant_is_caught_and_layout_1_is_untouched(cc, tmp_path: Path) -> None:
    """The special and attack buttons swapped in the fed-back command (obs.c)."""
    bad = _mutant(cc, tmp_path, lambda s: s.replace("{BP_BTN_JUMP, BP_BTN_ATTACK, BP_BTN_SPECIAL",
                                                    "{BP_BTN_JUMP, BP_BTN_SPECIAL, BP_BTN_ATTACK"))
    res = parity.run(states=2_000, seed=4, obs_bin=bad, layout=2)
    assert not res["ok"] and res["worst_dim_name"] in ("prev_attack", "prev_special")
    assert parity.run(states=2_000, seed=4, obs_bin=bad, layout=1)["ok"]


def test_obs_tool_refuses_unknown_layout_and_non_finite_commands(obs_bin: Path,
                                                                 tmp_path: Path) -> None:
    import struct

    import pytest

    from brawlkit.env.observation import build_input

    good = parity.snapshot_bytes(parity.P(), parity.P(x=5.0), 10)
    (tmp_path / "in.bin").write_bytes(bytes(4) + good + struct.pack("<ffI", float("nan"), 0.0, 0))
    r = subprocess.run([str(obs_bin), "--layout", "2", str(tmp_path / "in.bin"),
                        str(tmp_path / "o.bin")], capture_output=True, text=True)
    assert r.returncode == 1 and "non-finite" in r.stderr, r.stderr
    r = subprocess.run([str(obs_bin), "--layout", "9", str(tmp_path / "in.bin"),
                        str(tmp_path / "o.bin")], capture_output=True, text=True)
    assert r.returncode == 2 and "layout 9" in r.stderr, r.stderr
    with pytest.raises(ValueError, match="non-finite"):
        build_input(good, 0, 2, (float("nan"), 0.0, 0))
    with pytest.raises(ValueError, match="layout 9"):
        build_input(good, 0, 9)
