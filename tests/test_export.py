"""brawlkit.export: the .bpw writer/reader, encodings, numpy forward, action decoding."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from _bpw_fixtures import make_trained_like_checkpoint, torch_actor_mean
from hypothesis import given, settings
from hypothesis import strategies as st

from brawlkit import export as ex


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "ppo.zip"
    model = make_trained_like_checkpoint(path, seed=1)
    return path, model


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
    rep = ex.export_checkpoint(path, tmp_path / "p.bpw")
    assert [(r["in"], r["out"], r["activation"]) for r in rep["layers"]] == [
        (31, 64, "tanh"), (64, 64, "tanh"), (64, 6, "none")]
    data = (tmp_path / "p.bpw").read_bytes()
    assert len(data) == 20 + 3 * 12 + 4 * (31 * 64 + 64 + 64 * 64 + 64 + 64 * 6 + 6) == 26448
    bpw = ex.read_bpw(data)
    pol = model.policy
    ref = [pol.mlp_extractor.policy_net[0], pol.mlp_extractor.policy_net[2], pol.action_net]
    for lay, lin in zip(bpw.layers, ref, strict=True):
        assert np.array_equal(lay.weight, lin.weight.detach().numpy())  # no transpose
        assert np.array_equal(lay.bias, lin.bias.detach().numpy())


def test_explicit_little_endian_layout():
    layers = small_layers()
    raw = ex.pack_bpw(layers)
    assert raw[:20] == b"BPW1" + struct.pack("<IIII", 1, 3, 31, 6)
    assert raw[20:32] == struct.pack("<III", 31, 8, 1)
    w = layers[0].weight
    assert raw[56:60] == struct.pack("<f", w[0, 0])
    assert raw[60:64] == struct.pack("<f", w[0, 1])  # row-major: same output row next


def test_numpy_forward_matches_torch(ckpt, tmp_path):
    path, model = ckpt
    ex.export_checkpoint(path, tmp_path / "p.bpw")
    npol = ex.NumpyPolicy(tmp_path / "p.bpw")
    obs = np.random.default_rng(0).uniform(-2, 2, (10_000, 31)).astype(np.float32)
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
    rep = ex.export_checkpoint(path, tmp_path / "p.bpw", compress=compress)
    data = (tmp_path / "p.bpw").read_bytes()
    want = {"none": "raw", "lz4": "lz4", "shuffle": "shuffle", "auto": rep["best"]}[compress]
    assert ex.blob_kind(data) == want == rep["encoding"]
    assert ex.unwrap_blob(data) == ex.encode_blob(ex.unwrap_blob(data), "none")
    assert ex.read_bpw(data).table() == rep["layers"]


def test_compression_report(ckpt, tmp_path):
    path, _ = ckpt
    raw = ex.pack_bpw(ex.actor_layers(ex.load_sb3_policy(path)))
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
        (lambda r: _mut(r, 4, 2), "unknown version 2"),
        (lambda r: _mut(r, 8, 0), "n_layers 0"),
        (lambda r: _mut(r, 8, 17), "n_layers 17"),
        (lambda r: _mut(r, 12, 30), "layer 0 in=31 != obs_dim=30"),
        (lambda r: _mut(r, 16, 7), "!= act_dim=7"),
        (lambda r: _mut(r, 28, 3), "unknown activation 3"),
        (lambda r: _mut(r, 36, 9), "layer 2 in=8 != previous layer out=9"),
        (lambda r: _mut(r, 24, 5000), "outside 1..4096"),
        (lambda r: r[:-1], "truncated payload"),
        (lambda r: r[:40], "truncated layer table"),
        (lambda r: r[:10], "truncated header"),
        (lambda r: r + b"\0\0\0\0", "trailing data"),
        (lambda r: _mut(r, 56, 0x7FC00000), "non-finite"),
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


def test_unsupported_actor_refused(tmp_path):
    import torch

    from brawlkit.bench_native import make_model

    model = make_model(0)
    model.policy.mlp_extractor.policy_net[1] = torch.nn.ReLU()
    with pytest.raises(ValueError, match="unsupported actor module ReLU"):
        ex.actor_layers(model.policy)


def test_decode_action_rule():
    assert ex.decode_action([1.5, -2.0, 0.1, 0.0, -0.0, 1e-30]) == (1.0, -1.0, 1 | 8)
    assert ex.decode_action([np.nan, 0.25, np.nan, 1, 1, -1]) == (0.0, 0.25, 2 | 4)
    assert ex.decode_action(np.zeros(6, np.float32)) == (0.0, 0.0, 0)
    with pytest.raises(ValueError):
        ex.decode_action([0.0] * 5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=6, max_size=6))
def test_decode_action_property(a):
    sx, sy, b = ex.decode_action(a)
    assert -1.0 <= sx <= 1.0 and -1.0 <= sy <= 1.0
    assert sx == float(np.clip(np.float32(a[0]), -1, 1))
    assert b == sum(1 << i for i in range(4) if a[2 + i] > 0)


def test_export_module_has_no_torch_at_import():
    import subprocess
    import sys

    code = "import sys, brawlkit.export; print('torch' in sys.modules, 'stable_baselines3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_export_cli_writes_a_blob_the_c_loader_accepts(ckpt, tmp_path):
    import json
    import subprocess
    import sys

    from _bpw_fixtures import build_policy_tools

    ckpt = ckpt[0]
    out = tmp_path / "cli.bpw"
    r = subprocess.run([sys.executable, "-m", "brawlkit", "export", str(ckpt), "-o", str(out),
                        "--compress", "auto", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["out"] == str(out) and [lay["out"] for lay in summary["layers"]] == [64, 64, 6]
    tool, _ = build_policy_tools()
    assert subprocess.run([str(tool), "check", str(out)], capture_output=True).returncode == 0
    # a missing or non-checkpoint file is refused with a message naming it
    bad = tmp_path / "not_a_checkpoint.zip"
    bad.write_bytes(b"garbage")
    r = subprocess.run([sys.executable, "-m", "brawlkit", "export", str(bad), "-o",
                        str(tmp_path / "x.bpw")], capture_output=True, text=True)
    assert r.returncode != 0 and "not_a_checkpoint.zip" in r.stderr
    assert "Traceback" not in r.stderr
