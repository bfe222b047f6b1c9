"""brawlkit.export: the .bpw writer/reader (v2 and v1), encodings, the numpy forward,
the checkpoint's training metadata, the export CLI."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from helpers import large_weight_checkpoint, random_obs, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

from brawlkit.export import bpw as ex
from brawlkit.export.actor import (
    NumpyPolicy,
    actor_layers,
    checkpoint_meta,
    load_sb3_policy,
    torch_actor_mean,
)
from brawlkit.export.cli import export_checkpoint


@pytest.fixture
def ckpt(big_checkpoint):
    return big_checkpoint


def small_layers(seed: int = 0, dims=(31, 8, 8, 6)) -> list[ex.Layer]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(len(dims) - 1):
        w = rng.standard_normal((dims[i + 1], dims[i])).astype(np.float32)
        b = rng.standard_normal(dims[i + 1]).astype(np.float32)
        out.append(ex.Layer(w, b, ex.ACT_TANH if i < len(dims) - 2 else ex.ACT_NONE))
    return out


def test_export_roundtrip_is_exact(ckpt, tmp_path):
    path, model = ckpt
    rep = export_checkpoint(path, tmp_path / "p.bpw")
    assert [(r["in"], r["out"], r["activation"]) for r in rep["layers"]] == [
        (79, 64, "tanh"), (64, 64, "tanh"), (64, 6, "none")]  # input layout 2: 79 values
    data = (tmp_path / "p.bpw").read_bytes()
    assert len(data) == 44 + 3 * 12 + 4 * (79 * 64 + 64 + 64 * 64 + 64 + 64 * 6 + 6) == 38760
    assert rep["input_layout"] == 2
    bpw = ex.read_bpw(data)
    pol = model.policy
    ref = [pol.mlp_extractor.policy_net[0], pol.mlp_extractor.policy_net[2], pol.action_net]
    for lay, lin in zip(bpw.layers, ref, strict=True):
        assert np.array_equal(lay.weight, lin.weight.detach().numpy())  # no transpose
        assert np.array_equal(lay.bias, lin.bias.detach().numpy())


def test_explicit_little_endian_layout():
    layers = small_layers()
    raw = ex.pack_bpw(layers, ex.PolicyMeta(action_repeat=3, input_layout=1, reward="tiered"))
    assert raw[:28] == b"BPW1" + struct.pack("<IIIIII", 2, 3, 31, 6, 3, 1)
    assert raw[28:44] == b"tiered" + b"\0" * 10
    assert raw[44:56] == struct.pack("<III", 31, 8, 1)
    w = layers[0].weight
    assert raw[80:84] == struct.pack("<f", w[0, 0])
    assert raw[84:88] == struct.pack("<f", w[0, 1])  # row-major: same output row next


def test_numpy_forward_matches_torch(ckpt, tmp_path):
    path, model = ckpt
    export_checkpoint(path, tmp_path / "p.bpw")
    npol = NumpyPolicy(tmp_path / "p.bpw")
    obs = random_obs(10_000, npol.obs_dim, scale=2.0)
    mean = torch_actor_mean(model.policy, obs)
    assert np.abs(mean).max() > 1.0  # the test weights really leave [-1, 1]
    assert np.abs(npol.forward(obs) - mean).max() <= 1e-5
    pred, _ = model.predict(obs[:500], deterministic=True)
    assert np.abs(npol.act(obs[:500]) - pred).max() <= 1e-5
    one = npol(obs[0])
    assert one.shape == (6,) and one.dtype == np.float32
    assert np.all(np.abs(one) <= 1.0)


@pytest.mark.parametrize("compress", ["none", "lz4", "shuffle", "auto"])
def test_encodings_roundtrip(ckpt, tmp_path, compress):
    path, _ = ckpt
    rep = export_checkpoint(path, tmp_path / "p.bpw", compress=compress)
    data = (tmp_path / "p.bpw").read_bytes()
    want = {"none": "raw", "lz4": "lz4", "shuffle": "shuffle", "auto": rep["best"]}[compress]
    assert ex.blob_kind(data) == want == rep["encoding"]
    assert ex.unwrap_blob(data) == ex.encode_blob(ex.unwrap_blob(data), "none")
    assert ex.read_bpw(data).table() == rep["layers"]


def test_compression_report(ckpt, tmp_path):
    path, _ = ckpt
    raw = ex.pack_bpw(actor_layers(load_sb3_policy(path)))
    rep = ex.compression_report(raw)
    assert rep["raw_bytes"] == len(raw)
    assert rep["shuffle_lz4_bytes"] < rep["raw_bytes"]  # shuffle helps float weights a bit
    assert rep["lz4_ratio"] == rep["lz4_bytes"] / rep["raw_bytes"]
    assert rep["best"] == min(("raw", "lz4", "shuffle"), key=lambda k: len(rep["_blobs"][k]))
    # incompressible input: neither encoding helps, raw is kept
    noise = os.urandom(4096)
    rep2 = ex.compression_report(noise)
    assert rep2["best"] == "raw" and rep2["lz4_bytes"] > 4096 and rep2["shuffle_lz4_bytes"] > 4096
    assert ex.encode_blob(noise, "auto") == noise


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=256).map(lambda b: b[: len(b) // 4 * 4]))
def test_shuffle_inverse(data):
    assert ex.unshuffle_bytes(ex.shuffle_bytes(data)) == data


def _mut(raw: bytes, off: int, val: int) -> bytes:
    return raw[:off] + struct.pack("<I", val) + raw[off + 4:]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: b"BPW2" + r[4:], "unknown blob magic"),
        (lambda r: _mut(r, 4, 4), "unknown version 4"),
        (lambda r: _mut(r, 8, 0), "n_layers 0"),
        (lambda r: _mut(r, 8, 17), "n_layers 17"),
        (lambda r: _mut(r, 12, 30), "layer 0 in=31 != obs_dim=30"),
        (lambda r: _mut(r, 16, 7), "!= act_dim=7"),
        (lambda r: _mut(r, 20, 0), "action_repeat 0 outside"),
        (lambda r: _mut(r, 20, 65), "action_repeat 65 outside"),
        (lambda r: _mut(r, 24, 0), "input_layout 0"),
        (lambda r: _mut(r, 24, 0x80000000), "input_layout 2147483648 outside"),
        (lambda r: r[:28] + b"x" * 16 + r[44:], "not NUL-terminated"),
        (lambda r: r[:28] + b"ab\0c" + b"\0" * 12 + r[44:], "after its NUL"),
        (lambda r: r[:28] + b"a\x07\0" + b"\0" * 13 + r[44:], "not printable"),
        (lambda r: _mut(r, 52, 3), "unknown activation 3"),
        (lambda r: _mut(r, 60, 9), "layer 2 in=8 != previous layer out=9"),
        (lambda r: _mut(r, 48, 5000), "outside 1..4096"),
        (lambda r: r[:-1], "truncated payload"),
        (lambda r: r[:64], "truncated layer table"),
        (lambda r: r[:30], "truncated version-2 header"),
        (lambda r: r[:10], "truncated header"),
        (lambda r: r + b"\0\0\0\0", "trailing data"),
        (lambda r: _mut(r, 80, 0x7FC00000), "non-finite"),
    ],
)
def test_reader_rejects_with_clear_message(mutate, message):
    raw = ex.pack_bpw(small_layers())
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        ex.read_bpw(mutate(raw))


def test_wrappers_reject():
    raw = ex.pack_bpw(small_layers())
    lz = ex.compress_lz4(raw)
    sh = ex.compress_shuffled(raw)
    with pytest.raises(ValueError, match="truncated LZ4"):
        ex.read_bpw(lz[:-3])
    with pytest.raises(ValueError, match="trailing"):
        ex.read_bpw(lz + b"\0")
    with pytest.raises(ValueError, match="corrupt LZ4"):
        ex.read_bpw(lz[:30] + bytes([lz[30] ^ 1]) + lz[31:])
    with pytest.raises(ValueError, match="BPWS version"):
        ex.read_bpw(_mut(sh, 4, 2))
    with pytest.raises(ValueError, match="raw_len"):
        ex.read_bpw(_mut(sh, 8, len(raw) + 4))
    with pytest.raises(ValueError, match="unknown blob magic"):
        ex.read_bpw(b"\0" * 64)


def test_version_1_blob_still_loads_with_the_old_defaults(tmp_path):
    model = large_weight_checkpoint(tmp_path / "l1.zip", seed=2, input_layout=1)
    layers = actor_layers(model.policy)
    v1 = ex.pack_bpw(layers, version=1)
    assert v1[:20] == b"BPW1" + struct.pack("<IIII", 1, 3, 31, 6) and len(v1) == 26448
    for data in (v1, ex.compress_lz4(v1), ex.compress_shuffled(v1)):
        bpw = ex.read_bpw(data)
        assert bpw.version == 1
        assert bpw.meta == ex.PolicyMeta(action_repeat=4, input_layout=1, reward="")
    obs = np.random.default_rng(2).uniform(-1, 1, (64, 31)).astype(np.float32)
    assert np.array_equal(NumpyPolicy(v1).forward(obs), NumpyPolicy(ex.pack_bpw(layers)).forward(obs))
    with pytest.raises(ValueError, match="cannot carry"):
        ex.pack_bpw(layers, ex.PolicyMeta(action_repeat=2), version=1)


def test_checkpoint_meta_reads_the_zip_and_defaults_for_old_checkpoints(ckpt, tmp_path):
    from brawlkit.env.dummy import ZeroCostEnv
    from brawlkit.training.config import TrainConfig
    from brawlkit.training.ppo import build_model, scratch_checkpoint

    cfg = TrainConfig(action_repeat=3, reward="outcome:win=2", n_steps=64, batch_size=32)
    p = scratch_checkpoint(tmp_path / "new.zip", learn_steps=0, cfg=cfg)
    assert checkpoint_meta(p) == ex.PolicyMeta(action_repeat=3, input_layout=2, reward="outcome")
    export_checkpoint(p, tmp_path / "new.bpw", compress="lz4")
    assert ex.load_bpw(tmp_path / "new.bpw").meta == checkpoint_meta(p)
    # a checkpoint saved before the metadata existed (plain SB3): the version-1 defaults
    old = build_model(TrainConfig(n_envs=1, input_layout=1), ZeroCostEnv(input_layout=1))
    delattr(old, "brawlkit")
    old.save(str(tmp_path / "old.zip"))
    assert checkpoint_meta(tmp_path / "old.zip") == ex.PolicyMeta()
    with pytest.raises(ValueError, match="is a .bpw blob .*not an SB3 checkpoint: give the checkpoint zip"):
        checkpoint_meta(tmp_path / "new.bpw")


def test_unsupported_actor_refused(ckpt):
    import copy

    import torch

    policy = copy.deepcopy(ckpt[1].policy)
    policy.mlp_extractor.policy_net[1] = torch.nn.ReLU()
    with pytest.raises(ValueError, match="unsupported actor module ReLU"):
        actor_layers(policy)


def test_export_module_has_no_torch_at_import():
    import subprocess
    import sys

    code = ("import sys, brawlkit.export.bpw, brawlkit.export.actor; "
            "print('torch' in sys.modules, 'stable_baselines3' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_export_cli_writes_a_blob_the_c_loader_accepts(ckpt, tmp_path, policy_tools):
    import subprocess

    from helpers import last_json

    out = tmp_path / "cli.bpw"
    r = run_cli("export", str(ckpt[0]), "-o", str(out), "--compress", "auto", "--json")
    assert r.returncode == 0, r.stderr
    summary = last_json(r.stdout)
    assert summary["out"] == str(out) and [lay["out"] for lay in summary["layers"]] == [64, 64, 6]
    assert summary["version"] == 2 and summary["action_repeat"] == 4 and summary["input_layout"] == 2
    info = subprocess.run([str(policy_tools[0]), "info", str(out)], capture_output=True, text=True)
    assert info.returncode == 0 and "action_repeat 4" in info.stdout, info.stdout + info.stderr
    # a missing or non-checkpoint file is refused with a message naming it
    bad = tmp_path / "not_a_checkpoint.zip"
    bad.write_bytes(b"garbage")
    r = run_cli("export", str(bad), "-o", str(tmp_path / "x.bpw"))
    assert r.returncode != 0 and "not_a_checkpoint.zip" in r.stderr
    assert "Traceback" not in r.stderr


# ----------------------------------------------------------------- the sampled policy (v3)


def test_sampled_blob_is_version_3_with_its_noise_section():
    layers = small_layers()
    std = np.array([0.5, 0.25, 1.0, 2.0, 0.125, 3.0], np.float32)
    raw = ex.pack_bpw(layers, ex.PolicyMeta(action_repeat=3), noise_std=std)
    det = ex.pack_bpw(layers, ex.PolicyMeta(action_repeat=3))
    assert struct.unpack_from("<I", raw, 4)[0] == 3 and struct.unpack_from("<I", det, 4)[0] == 2
    # v3 = the v2 bytes with version 3, then u32 kind 1 and act_dim float32 stds
    assert raw[8:len(det)] == det[8:] and len(raw) == len(det) + 4 + 4 * 6
    assert raw[len(det):] == struct.pack("<I", 1) + std.astype("<f4").tobytes()
    back = ex.parse_bpw(raw)
    assert back.version == 3 and np.array_equal(back.noise_std, std)
    assert ex.parse_bpw(det).noise_std is None
    for enc in ("lz4", "shuffle"):
        assert np.array_equal(ex.read_bpw(ex.encode_blob(raw, enc)).noise_std, std)


@pytest.mark.parametrize("mutate,msg", [
    (lambda r: r[:-4], "truncated noise section"),
    (lambda r: r[:-28], "truncated noise section"),
    (lambda r: r + b"\0\0\0\0", "trailing data"),
    (lambda r: r[:-28] + struct.pack("<I", 2) + r[-24:], "unknown noise kind 2"),
    (lambda r: r[:-4] + struct.pack("<f", 0.0), r"noise std\[5\] = 0.0 outside"),
    (lambda r: r[:-4] + struct.pack("<f", -1.0), r"noise std\[5\] = -1.0 outside"),
    (lambda r: r[:-4] + struct.pack("<f", float("nan")), r"noise std\[5\]"),
    (lambda r: r[:-4] + struct.pack("<f", 101.0), r"noise std\[5\] = 101.0 outside \(0, 100\]"),
    (lambda r: r[:4] + struct.pack("<I", 2) + r[8:], "trailing data"),  # a v3 body read as v2
])
def test_a_bad_noise_section_is_refused_naming_it(mutate, msg):
    raw = ex.pack_bpw(small_layers(), noise_std=np.full(6, 0.5))
    with pytest.raises(ValueError, match=msg):
        ex.parse_bpw(mutate(raw))
    det = ex.pack_bpw(small_layers())
    with pytest.raises(ValueError, match="truncated noise section"):  # a v2 body read as v3
        ex.parse_bpw(det[:4] + struct.pack("<I", 3) + det[8:])
    with pytest.raises(ValueError, match="version 2 cannot carry noise"):
        ex.pack_bpw(small_layers(), noise_std=np.full(6, 0.5), version=2)
    with pytest.raises(ValueError, match="shape"):
        ex.pack_bpw(small_layers(), noise_std=np.full(5, 0.5))


def test_noise_stream_is_the_documented_rule():
    """splitmix64 + Box-Muller, written out here in plain Python integers: the batched
    numpy stream draws exactly these numbers, in this order, however it is split."""
    import math

    from brawlkit.export.actor import NoiseStream

    def splitmix(state):
        state = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return state, z ^ (z >> 31)

    state, ref = 2**64 - 5, []  # wraps around
    for _ in range(3 * 4):  # 4 decisions of act_dim 5: 3 pairs each, the last sine dropped
        state, x1 = splitmix(state)
        state, x2 = splitmix(state)
        u1, u2 = ((x1 >> 11) + 0.5) * 2.0**-53, ((x2 >> 11) + 0.5) * 2.0**-53
        r = math.sqrt(-2.0 * math.log(u1))
        ref += [r * math.cos(2.0 * math.pi * u2), r * math.sin(2.0 * math.pi * u2)]
    ref = np.array(ref, np.float32).reshape(4, 6)[:, :5]
    s = NoiseStream(2**64 - 5)
    got = np.concatenate([s.normals(1, 5), s.normals(3, 5)])
    assert np.allclose(got, ref, rtol=0, atol=1e-6), np.abs(got - ref).max()
    z = NoiseStream(7).normals(50_000, 6)
    assert abs(float(z.mean())) < 0.01 and abs(float(z.std()) - 1) < 0.01


def test_export_sampled_plays_the_policy_sb3_trains(ckpt, tmp_path):
    """``export --sampled``: the blob carries exp(log_std) (times --noise-scale); its
    sampled actions are the mean plus that noise, clipped, the evaluation's own
    SampledPolicy draws the same actions, and the deterministic export is unchanged."""
    from brawlkit.export.actor import NoiseStream
    from brawlkit.training.evaluate import SampledPolicy

    path, model = ckpt
    r = run_cli("export", str(path), "-o", str(tmp_path / "s.bpw"), "--sampled", "--noise-scale",
                "0.5", "--json")
    assert r.returncode == 0, r.stderr
    from helpers import last_json

    summary = last_json(r.stdout)
    std = np.exp(model.policy.log_std.detach().numpy()).astype(np.float32) * np.float32(0.5)
    assert summary["version"] == 3 and np.allclose(summary["noise_std"], std)
    assert "sampled, std" in r.stdout
    pol = NumpyPolicy(tmp_path / "s.bpw")
    obs = random_obs(500, 79, seed=3)
    z = NoiseStream(11).normals(500, 6)
    assert np.allclose(pol.noise_std, std, rtol=1e-6)
    want = np.clip(pol.forward(obs) + pol.noise_std * z, -1, 1)
    assert np.array_equal(pol.sample(obs, NoiseStream(11)), want)
    sp = SampledPolicy.from_sb3(model.policy, checkpoint_meta(path), seed=11)
    full = np.exp(model.policy.log_std.detach().numpy()).astype(np.float32)
    assert np.allclose(sp(obs), np.clip(pol.forward(obs) + full * z, -1, 1), atol=1e-6)
    assert export_checkpoint(path, tmp_path / "d.bpw")["version"] == 2
    with pytest.raises(ValueError, match="deterministic policy .* --sampled"):
        NumpyPolicy(tmp_path / "d.bpw").sample(obs, NoiseStream(0))
    r = run_cli("export", str(path), "-o", str(tmp_path / "x.bpw"), "--sampled",
                "--noise-scale", "0")
    assert r.returncode == 1 and "--noise-scale must be > 0" in r.stderr
