"""Mixture blobs (``BPWM``, docs/bpw.md "Mixtures"): several policies, one played per
match, picked by the match seed — the same rule in C (``bp_policy_select``) and Python
(``mixture_pick``); C and Python refuse the same bad containers; ``export`` writes one
from several checkpoints; and a mixture judged on real matches plays, on each seed, the
component that seed picks, as an opponent and as the policy judged."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import large_weight_checkpoint, run_cli

from brawlkit.export import bpw as ex
from brawlkit.export.actor import NumpyPolicy


@pytest.fixture(scope="module")
def tool(policy_tools):
    return policy_tools[0]


def _raw(seed: int, **meta) -> bytes:
    rng = np.random.default_rng(seed)
    layers = [ex.Layer(rng.standard_normal((16, 79)).astype(np.float32),
                       rng.standard_normal(16).astype(np.float32), ex.ACT_TANH),
              ex.Layer(rng.standard_normal((6, 16)).astype(np.float32),
                       rng.standard_normal(6).astype(np.float32), ex.ACT_NONE)]
    return ex.pack_bpw(layers, ex.PolicyMeta(**{"action_repeat": 4, "input_layout": 2,
                                                "reward": "tiered", **meta}))


def test_a_mixture_round_trips_and_picks_one_policy_per_match_as_c_does(tool, tmp_path):
    raws = [_raw(s) for s in range(3)]
    mix = ex.pack_mixture(raws)
    assert mix[:4] == ex.MIX_MAGIC and ex.split_mixture(mix) == raws
    assert ex.split_mixture(raws[0]) == [raws[0]]  # a single blob is a mixture of one
    (tmp_path / "m.bpw").write_bytes(mix)
    out = subprocess.run([str(tool), "check", str(tmp_path / "m.bpw")], capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("ok kind=mixture layers=2 obs=79 act=6 version=2"), out
    # the pick: C and Python agree seed for seed, and it is a fair die
    picks = subprocess.run([str(tool), "pick", str(tmp_path / "m.bpw"), "1000", "600"],
                           capture_output=True, text=True, check=True).stdout.split()
    assert [int(p) for p in picks] == [ex.mixture_pick(s, 3) for s in range(1000, 1600)]
    counts = np.bincount([int(p) for p in picks], minlength=3)
    assert counts.min() > 150, counts
    # and the match's component is the one whose weights play
    obs = np.random.default_rng(0).standard_normal((50, 79)).astype(np.float32)
    (tmp_path / "obs.f32").write_bytes(obs.astype("<f4").tobytes())
    for seed in range(1000, 1006):
        subprocess.run([str(tool), "forward", "--match", str(seed), str(tmp_path / "m.bpw"),
                        str(tmp_path / "obs.f32"), str(tmp_path / "out.f32")], check=True)
        c = np.fromfile(tmp_path / "out.f32", dtype="<f4").reshape(50, 6)
        k = ex.mixture_pick(seed, 3)
        assert np.abs(c - NumpyPolicy(raws[k]).forward(obs)).max() <= 1e-5
        assert np.abs(c - NumpyPolicy(raws[(k + 1) % 3]).forward(obs)).max() > 1e-2
    # a reader of one policy refuses a mixture by name
    with pytest.raises(ValueError, match="a mixture of policies"):
        ex.read_bpw(mix)


def _c_refusal(tool: Path, data: bytes, tmp_path: Path) -> str:
    (tmp_path / "bad.bpw").write_bytes(data)
    r = subprocess.run([str(tool), "check", str(tmp_path / "bad.bpw")], capture_output=True,
                       text=True)
    assert r.returncode == 1, r.stdout
    return r.stdout + r.stderr


@pytest.mark.parametrize("name,make,why", [
    ("truncated header", lambda m, r: m[:10], "truncated BPWM header"),
    ("unknown version", lambda m, r: m[:4] + struct.pack("<I", 9) + m[8:], "unknown BPWM version 9"),
    ("count 1", lambda m, r: m[:8] + struct.pack("<I", 1) + m[12:], "BPWM count 1 outside 2..16"),
    ("count 17", lambda m, r: m[:8] + struct.pack("<I", 17) + m[12:], "BPWM count 17 outside"),
    ("length past the end", lambda m, r: m[:12] + struct.pack("<I", len(m)) + m[16:],
     "component 0's length"),
    ("trailing bytes", lambda m, r: m + b"\0\0\0\0", "4 bytes after its last component"),
    ("missing component", lambda m, r: m[:12 + 4 + len(r[0])], "truncated before component 1"),
    ("a compressed component", lambda m, r: m[:16] + b"BPWS" + m[20:], "component 0 is not a raw"),
])
def test_c_and_python_refuse_the_same_bad_mixtures(tool, tmp_path, name, make, why):
    raws = [_raw(1), _raw(2)]
    bad = make(ex.pack_mixture(raws), raws)
    with pytest.raises(ValueError, match=why):
        ex.split_mixture(bad)
    assert why.split(" outside")[0] in _c_refusal(tool, bad, tmp_path), name


def test_components_that_disagree_are_refused_in_both(tool, tmp_path):
    with pytest.raises(ValueError, match="component 1 has action_repeat 2"):
        ex.pack_mixture([_raw(1), _raw(2, action_repeat=2)])
    a, b = _raw(1), _raw(2, action_repeat=2)
    forged = ex.MIX_MAGIC + struct.pack("<II", 1, 2) + struct.pack("<I", len(a)) + a \
        + struct.pack("<I", len(b)) + b
    assert "component 1 disagrees with component 0" in _c_refusal(tool, forged, tmp_path)
    with pytest.raises(ValueError, match="component 1 has action_repeat"):
        ex.split_mixture(forged)
    with pytest.raises(ValueError, match="2..16 policies, got 1"):
        ex.pack_mixture([a])


def test_export_writes_a_mixture_of_several_checkpoints(tmp_path):
    """``export A.zip B.zip -o mix.bpw``: the components are exactly the blobs each
    checkpoint exports alone, in order; a compressed mixture is refused."""
    zips = [tmp_path / "a.zip", tmp_path / "b.zip"]
    for z, s in zip(zips, (3, 8), strict=True):
        large_weight_checkpoint(z, seed=s)
    r = run_cli("export", *map(str, zips), "-o", str(tmp_path / "mix.bpw"))
    assert r.returncode == 0 and "a mixture of 2 policies" in r.stdout, r.stderr
    for z in zips:
        assert run_cli("export", str(z), "-o", str(z.with_suffix(".bpw"))).returncode == 0
    assert ex.split_mixture((tmp_path / "mix.bpw").read_bytes()) == \
        [z.with_suffix(".bpw").read_bytes() for z in zips]
    r = run_cli("export", *map(str, zips), "-o", str(tmp_path / "m2.bpw"), "--compress", "lz4")
    assert r.returncode == 2 and "a mixture is written raw" in r.stderr


def _constant(stick_x: float, attack: bool) -> bytes:
    """A layout-2 blob whose action is a constant, whatever it sees: its matches do not
    depend on how the forward pass is batched, so a mixture's match can be compared with
    its component's match alone, tick for tick."""
    z = np.zeros
    head = np.array([stick_x, 0, -1, 1 if attack else -1, -1, -1], np.float32)
    return ex.pack_bpw([ex.Layer(z((16, 79), np.float32), z(16, np.float32), ex.ACT_TANH),
                        ex.Layer(z((6, 16), np.float32), head, ex.ACT_NONE)],
                       ex.PolicyMeta(action_repeat=4, input_layout=2, reward="tiered"))


@pytest.mark.servers
def test_a_mixture_plays_each_seeds_component_as_policy_and_as_opponent(tmp_path):
    """Judged against the CPU, each match of a mixture is the match its picked component
    plays alone (the same seed, outcome and length); as an opponent, the same."""
    from brawlkit.league.opponents import MixtureOpponent, fixed_opponent
    from brawlkit.training.evaluate import evaluate_shipped, play_episodes, shipped_policies

    parts = [tmp_path / "still.bpw", tmp_path / "run.bpw"]
    parts[0].write_bytes(_constant(0.0, True))
    parts[1].write_bytes(_constant(1.0, False))
    (tmp_path / "mix.bpw").write_bytes(ex.pack_mixture([p.read_bytes() for p in parts]))
    assert len(shipped_policies(tmp_path / "mix.bpw")) == 2
    mixed = evaluate_shipped(tmp_path / "mix.bpw", ("cpu:2",), 6, n_envs=3, progress=False)
    alone = [evaluate_shipped(p, ("cpu:2",), 6, n_envs=3, progress=False) for p in parts]
    picks = [ex.mixture_pick(m["seed"], 2) for m in mixed["cpu:2"]["matches"]]
    assert set(picks) == {0, 1}, picks  # both components played
    for m, k in zip(mixed["cpu:2"]["matches"], picks, strict=True):
        same = next(x for x in alone[k]["cpu:2"]["matches"] if x["seed"] == m["seed"])
        assert (m["outcome"], m["ticks"]) == (same["outcome"], same["ticks"])
    # the components play differently, so the comparison can fail
    assert [m["ticks"] for m in alone[0]["cpu:2"]["matches"]] != \
        [m["ticks"] for m in alone[1]["cpu:2"]["matches"]]
    # as an opponent
    opp = fixed_opponent(str(tmp_path / "mix.bpw"), 2, 4)
    assert isinstance(opp, MixtureOpponent) and opp.label == "mix.bpw"
    # training draws one component per match, under the mixture's label
    from brawlkit.league.curriculum import SingleOpponent

    single = SingleOpponent(opp, seed=1)
    assert {id(single.sample()) for _ in range(40)} == {id(c) for c in opp.components}
    assert all(c.label == "mix.bpw" for c in opp.components)
    me = NumpyPolicy(_constant(-0.3, True))
    kw = {"action_repeat": 4, "input_layout": 2}
    vs_mix = play_episodes(me, opp, 4, 500, n_envs=2, env_kwargs=kw)
    assert vs_mix["vs"] == "mix.bpw"
    for m in vs_mix["matches"]:
        k = ex.mixture_pick(m["seed"], 2)
        one = play_episodes(me, fixed_opponent(str(parts[k]), 2, 4), 1, m["seed"], n_envs=1,
                            env_kwargs=kw)["matches"][0]
        assert (m["outcome"], m["ticks"]) == (one["outcome"], one["ticks"])
