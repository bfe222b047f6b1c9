"""The C loader/forward (native/src/policy.c) against torch, numpy and the Python reader.

- parity: C forward vs the torch actor mean on 10,000 observations, max abs diff <= 1e-5
  (the numpy forward too), for raw, LZ4 and shuffled blobs of the same weights;
- action decoding: C ``bp_action_decode`` == ``brawlkit.env.actions.decode_action``;
- sampling: a version-3 blob's sampled actions, C ``bp_policy_sample`` against
  ``NumpyPolicy.sample`` with the same ``NoiseStream`` seed, on 10,000 observations;
- the blob's training metadata (v2) as the C loader reports it, and v1 blobs;
- fuzz: 10,000 corrupted / truncated / wrong-version / bit-flipped / size-lied blobs
  (raw, LZ4, shuffled) streamed into ONE process of the AddressSanitizer+UBSan build;
  it must exit 0 (any ASan/UBSan report aborts it non-zero), and for every blob C's
  accept/refuse equals the Python reader's.  Must-refuse classes (truncation, wrong
  version/magic, header lies, trailing bytes, any change to a compressed blob) are
  asserted refused; a bit flip in a raw blob's float payload is accepted iff the values
  stay finite (the raw format has no checksum — docs/bpw.md).
"""

from __future__ import annotations

import struct
import subprocess

import numpy as np
import pytest

from brawlkit.env.actions import decode_action
from brawlkit.export import bpw as ex
from brawlkit.export.actor import NumpyPolicy, actor_layers, torch_actor_mean

HEAD = ex.HEADER_BYTES[ex.VERSION]


@pytest.fixture(scope="module")
def tools(policy_tools):
    return policy_tools


@pytest.fixture(scope="module")
def ckpt(big_checkpoint):
    path, model = big_checkpoint
    meta = ex.PolicyMeta(action_repeat=2, input_layout=2, reward="tiered")
    return path.parent, model, ex.pack_bpw(actor_layers(model.policy), meta)


def c_forward(exe, blob_path, obs, tmp, ref=False):
    (tmp / "obs.f32").write_bytes(obs.astype("<f4").tobytes())
    args = [str(exe), "forward"] + (["--ref"] if ref else []) + [
        str(blob_path), str(tmp / "obs.f32"), str(tmp / "out.f32")]
    subprocess.run(args, check=True)
    return np.fromfile(tmp / "out.f32", dtype="<f4").reshape(len(obs), -1)


def test_c_forward_parity_with_torch_and_numpy(tools, ckpt, tmp_path):
    exe, _ = tools
    d, model, raw = ckpt
    rng = np.random.default_rng(7)
    dim = ex.parse_bpw(raw).obs_dim
    obs = np.concatenate([
        rng.uniform(-1, 1, (6_000, dim)),
        rng.uniform(-3, 3, (3_000, dim)),
        rng.choice([-1.0, 0.0, 1.0], (1_000, dim)),
    ]).astype(np.float32)
    mean = torch_actor_mean(model.policy, obs)
    assert np.abs(mean).max() > 1.0
    outs = {}
    for kind in ("none", "lz4", "shuffle"):
        p = tmp_path / f"{kind}.bpw"
        p.write_bytes(ex.encode_blob(raw, kind))
        outs[kind] = c_forward(exe, p, obs, tmp_path)
    c = outs["none"]
    assert np.array_equal(c, outs["lz4"]) and np.array_equal(c, outs["shuffle"])
    diff_c = float(np.abs(c - mean).max())
    diff_np = float(np.abs(NumpyPolicy(raw).forward(obs) - mean).max())
    diff_ref = float(np.abs(c_forward(exe, tmp_path / "none.bpw", obs, tmp_path, ref=True)
                            - mean).max())
    print(f"max|C-torch|={diff_c:.3g} max|numpy-torch|={diff_np:.3g} max|Cref-torch|={diff_ref:.3g}")
    assert diff_c <= 1e-5 and diff_np <= 1e-5 and diff_ref <= 1e-5
    # what the live game plays: predict(deterministic) == clip(C mean)
    pred, _ = model.predict(obs[:2000], deterministic=True)
    assert np.abs(np.clip(c[:2000], -1, 1) - pred).max() <= 1e-5


@pytest.mark.parametrize("hidden", [(256, 256), (128, 64, 32), (48,)])
def test_c_forward_parity_at_other_sizes(tools, tmp_path, hidden):
    """``--hidden`` (TrainConfig) is a measured choice, so every width the C forward may
    meet is held to torch: its 64-wide blocks, a remainder, one layer, three."""
    from helpers import large_weight_checkpoint

    exe, asan = tools
    model = large_weight_checkpoint(tmp_path / "wide.zip", seed=3, hidden=hidden)
    raw = ex.pack_bpw(actor_layers(model.policy), ex.PolicyMeta(4, 2, "tiered"))
    assert [lay.n_out for lay in ex.parse_bpw(raw).layers] == [*hidden, 6]
    obs = np.random.default_rng(11).uniform(-2, 2, (2_000, ex.parse_bpw(raw).obs_dim))
    obs = obs.astype(np.float32)
    mean = torch_actor_mean(model.policy, obs)
    blob = tmp_path / "wide.bpw"
    blob.write_bytes(ex.encode_blob(raw, "lz4"))
    # float32 sums in another order: the error grows with the outputs (|mean| up to ~8
    # here), so the bound is relative to them
    tol = 1e-5 * np.maximum(1.0, np.abs(mean))
    for tool in (exe, asan):  # the AddressSanitizer+UBSan build reads and runs it cleanly
        assert (np.abs(c_forward(tool, blob, obs, tmp_path) - mean) <= tol).all()


def test_c_decode_matches_python(tools, tmp_path):
    exe, _ = tools
    rng = np.random.default_rng(1)
    specials = np.array([0.0, -0.0, 1.0, -1.0, 1.0000001, -1.0000001, 1e-38, -1e-38, 1e-45,
                         np.inf, -np.inf, np.nan, 3.0e38], np.float32)
    a = np.concatenate([
        rng.normal(0, 1.5, (3000, 6)).astype(np.float32),
        rng.choice(specials, (2000, 6)),
    ]).astype(np.float32)
    (tmp_path / "a.f32").write_bytes(a.astype("<f4").tobytes())
    subprocess.run([str(exe), "decode", str(tmp_path / "a.f32"), str(tmp_path / "d.txt")],
                   check=True)
    lines = (tmp_path / "d.txt").read_text().splitlines()
    assert len(lines) == len(a)
    for row, line in zip(a, lines, strict=True):
        sx, sy, b = line.split()
        assert (np.float32(sx), np.float32(sy), int(b)) == decode_action(row), row


def test_c_sampling_matches_python(tools, ckpt, tmp_path):
    """A sampled blob (version 3): C's ``bp_policy_sample`` and ``NumpyPolicy.sample`` draw
    the same noise from the same seed (the sampling rule of docs/bpw.md), so the sampled
    actions agree within the forward pass's bound and every button decodes the same
    (but where the mean sits within that bound of 0); ``info`` reports the noise."""
    from brawlkit.export.actor import NoiseStream

    exe, _ = tools
    _, model, raw = ckpt
    std = np.array([0.05, 0.3, 0.6, 1.0, 1.5, 2.5], np.float32)
    blob = tmp_path / "s.bpw"
    blob.write_bytes(ex.compress_shuffled(ex.pack_bpw(ex.parse_bpw(raw).layers,
                                                      ex.parse_bpw(raw).meta, noise_std=std)))
    obs = np.random.default_rng(5).uniform(-1, 1, (10_000, 79)).astype(np.float32)
    (tmp_path / "obs.f32").write_bytes(obs.astype("<f4").tobytes())
    seed = 2**63 + 12345
    subprocess.run([str(exe), "forward", "--sample", str(seed), str(blob), str(tmp_path / "obs.f32"),
                    str(tmp_path / "out.f32")], check=True)
    c = np.fromfile(tmp_path / "out.f32", dtype="<f4").reshape(len(obs), 6)
    pol = NumpyPolicy(blob)
    py = pol.sample(obs, NoiseStream(seed))
    assert np.abs(c - py).max() <= 1e-5, np.abs(c - py).max()
    mean = pol.forward(obs)
    assert np.abs(c - np.clip(mean, -1, 1)).max() > 0.5  # the noise is there
    near = np.abs(py) <= 1e-5
    assert ((c > 0) == (py > 0))[~near].all()
    r = subprocess.run([str(exe), "info", str(blob)], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    assert "version 3" in lines and "noise gaussian" in lines, r.stdout
    got = next(ln for ln in lines if ln.startswith("noise_std ")).split()[1:]
    assert np.array_equal(np.array(got, np.float32), std)
    (tmp_path / "det.bpw").write_bytes(raw)
    r = subprocess.run([str(exe), "forward", "--sample", "1", str(tmp_path / "det.bpw"),
                        str(tmp_path / "obs.f32"), str(tmp_path / "o2.f32")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "needs a version-3 blob" in r.stderr


def test_check_cli_messages(tools, ckpt, tmp_path):
    exe, _ = tools
    _, _, raw = ckpt
    good = tmp_path / "g.bpw"
    good.write_bytes(ex.compress_shuffled(raw))
    r = subprocess.run([str(exe), "check", str(good)], capture_output=True, text=True)
    assert r.returncode == 0 and "ok kind=shuffle layers=3 obs=79 act=6" in r.stdout
    r = subprocess.run([str(exe), "info", str(good)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    for line in ("version 2", "action_repeat 2", "input_layout 2", "reward tiered"):
        assert line in r.stdout.splitlines(), r.stdout
    v1 = tmp_path / "v1.bpw"
    v1.write_bytes(ex.pack_bpw(ex.parse_bpw(raw).layers, version=1))
    r = subprocess.run([str(exe), "info", str(v1)], capture_output=True, text=True)
    for line in ("version 1", "action_repeat 4", "input_layout 1"):
        assert line in r.stdout.splitlines(), r.stdout
    for off, val, msg in ((20, 0, "action_repeat"), (24, 0, "input_layout")):
        bad = tmp_path / "m.bpw"
        bad.write_bytes(raw[:off] + struct.pack("<I", val) + raw[off + 4:])
        r = subprocess.run([str(exe), "check", str(bad)], capture_output=True, text=True)
        assert r.returncode == 1 and msg in r.stdout, r.stdout
    bad = tmp_path / "b.bpw"
    bad.write_bytes(raw[:4] + struct.pack("<I", 9) + raw[8:])
    r = subprocess.run([str(exe), "check", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1 and "unknown version 9" in r.stdout
    r = subprocess.run([str(exe), "check", str(tmp_path / "missing.bpw")],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "cannot open" in r.stdout


# ----------------------------------------------------------------------------- fuzz

LIES = [0, 1, 2, 3, 5, 6, 7, 8, 9, 16, 17, 31, 32, 63, 64, 65, 4096, 4097, 0x10000,
        0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def _head(raw: bytes) -> int:
    return ex.HEADER_BYTES[struct.unpack_from("<I", raw, 4)[0]]


def _small_raw(rng) -> bytes:
    dims = [31] + [int(rng.integers(1, 12)) for _ in range(int(rng.integers(0, 3)))] + [6]
    layers = []
    for i in range(len(dims) - 1):
        w = rng.standard_normal((dims[i + 1], dims[i])).astype(np.float32)
        b = rng.standard_normal(dims[i + 1]).astype(np.float32)
        layers.append(ex.Layer(w, b, int(rng.integers(0, 2))))
    if rng.integers(0, 4) == 0:  # a quarter of the corpus in the old format
        return ex.pack_bpw(layers, version=1)
    meta = ex.PolicyMeta(int(rng.integers(1, 65)), 1, ["", "tiered", "llm_fighting"][int(rng.integers(0, 3))])
    if rng.integers(0, 3) == 0:  # a third of the rest sampled policies (version 3)
        return ex.pack_bpw(layers, meta, noise_std=rng.uniform(0.01, 3.0, 6))
    return ex.pack_bpw(layers, meta)


def _mutate(rng, raw: bytes) -> tuple[bytes, str, bool]:
    """Return (blob, label, must_refuse)."""
    enc = ["none", "lz4", "shuffle"][int(rng.integers(0, 3))]
    blob = bytearray(ex.encode_blob(raw, enc))
    kind = int(rng.integers(0, 8))
    compressed = enc != "none"
    if kind == 0:  # truncation
        return bytes(blob[: int(rng.integers(0, len(blob)))]), f"{enc}/trunc", True
    if kind == 1:  # one bit flip anywhere
        pos = int(rng.integers(0, len(blob)))
        blob[pos] ^= 1 << int(rng.integers(0, 8))
        payload = not compressed and pos >= _head(raw) + 12 * struct.unpack_from("<I", raw, 8)[0]
        # raw header flips may still be valid (e.g. tanh<->none): oracle decides
        return bytes(blob), f"{enc}/flip", compressed or (not payload and pos < 20 and pos != 8)
    if kind == 2:  # several bit flips in the first 64 bytes (header, table, frame header)
        for _ in range(int(rng.integers(2, 6))):
            pos = int(rng.integers(0, min(64, len(blob))))
            blob[pos] ^= 1 << int(rng.integers(0, 8))
        return bytes(blob), f"{enc}/hdrflips", compressed
    if kind == 3:  # size lie in a header / table field (of the raw blob, then re-encoded)
        n_layers = struct.unpack_from("<I", raw, 8)[0]
        fields = [8, 12, 16] + [_head(raw) + 12 * i + k for i in range(n_layers) for k in (0, 4)]
        off = fields[int(rng.integers(0, len(fields)))]
        old = struct.unpack_from("<I", raw, off)[0]
        val = int(rng.choice(LIES + [old + 1, old - 1 if old else 1]))
        if val == old:
            val = old + 1
        r2 = raw[:off] + struct.pack("<I", val & 0xFFFFFFFF) + raw[off + 4:]
        return ex.encode_blob(r2, enc), f"{enc}/lie", True
    if kind == 4:  # wrong version (of the blob or of the BPWS wrapper)
        v = int(rng.choice([0, 4, 5, 255, 0xFFFFFFFF]))
        if enc == "shuffle" and rng.integers(0, 2):
            blob[4:8] = struct.pack("<I", v)
            return bytes(blob), "shuffle/wrapver", True
        r2 = raw[:4] + struct.pack("<I", v) + raw[8:]
        return ex.encode_blob(r2, enc), f"{enc}/version", True
    if kind == 5:  # trailing bytes
        return bytes(blob) + bytes(rng.integers(0, 256, int(rng.integers(1, 9)), np.uint8)), \
            f"{enc}/trailing", True
    if kind == 6:  # BPWS raw_len lie / garbage after a valid magic
        if enc == "shuffle":
            old = struct.unpack_from("<I", blob, 8)[0]
            val = int(rng.choice([0, 4, 20, old - 4, old + 4, old + 1, 16 << 20, 0xFFFFFFFC]))
            blob[8:12] = struct.pack("<I", val & 0xFFFFFFFF)
            return bytes(blob), "shuffle/rawlen", True
        head = bytes(blob[:4])
        return head + bytes(rng.integers(0, 256, int(rng.integers(0, 200)), np.uint8)), \
            f"{enc}/garbage", True
    # kind 7: random payload float replaced (raw): accepted iff finite
    if compressed:
        pos = int(rng.integers(4, len(blob)))
        blob[pos] = (blob[pos] + int(rng.integers(1, 256))) & 0xFF
        return bytes(blob), f"{enc}/byte", True
    start = _head(raw) + 12 * struct.unpack_from("<I", raw, 8)[0]
    pos = start + 4 * int(rng.integers(0, (len(raw) - start) // 4))
    val = rng.choice([np.float32(np.nan), np.float32(np.inf), np.float32(-np.inf),
                      np.float32(1e30), np.float32(-0.0)])
    blob[pos:pos + 4] = struct.pack("<f", val)
    return bytes(blob), "raw/payload", not np.isfinite(val)


def test_fuzz_asan_10000_blobs(tools, ckpt):
    _, asan = tools
    _, _, full_raw = ckpt
    rng = np.random.default_rng(2024)
    blobs: list[tuple[bytes, str, bool, bytes]] = []
    smalls = [_small_raw(rng) for _ in range(40)]
    for i in range(10_000):
        raw = full_raw if i % 50 == 0 else smalls[int(rng.integers(0, len(smalls)))]
        blobs.append((*_mutate(rng, raw), raw))
    # plus every valid encoding, which must load
    for raw in smalls[:5] + [full_raw]:
        for enc in ("none", "lz4", "shuffle"):
            blobs.append((ex.encode_blob(raw, enc), f"{enc}/valid", False, raw))
    stream = b"".join(struct.pack("<I", len(b)) + b for b, _, _, _ in blobs)
    r = subprocess.run([str(asan), "fuzz"], input=stream, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")[-3000:]
    lines = r.stdout.decode().splitlines()
    assert lines[-1] == f"done {len(blobs)}"
    n_refused = n_same = 0
    for (blob, label, must_refuse, raw), line in zip(blobs, lines[:-1], strict=True):
        idx, verdict, *rest = line.split(" ", 2)
        try:
            ex.read_bpw(blob)
            py_ok = True
        except ValueError:
            py_ok = False
        c_ok = verdict == "ok"
        assert c_ok == py_ok, (idx, label, line)
        if must_refuse and c_ok:
            # the one allowed exception: a flip inside compressed data that decodes to
            # the very same bytes (e.g. a match offset pointing at identical bytes) --
            # the content checksum passes because the content is unchanged
            assert not label.startswith("none/") and ex.unwrap_blob(blob) == raw, (idx, label)
            n_same += 1
        if label.endswith("/valid"):
            assert c_ok, (idx, label, line)
        n_refused += not c_ok
    print(f"fuzz: {len(blobs)} blobs, {n_refused} refused, {len(blobs) - n_refused} accepted"
          f" ({n_same} compressed flips decoding to identical content)")
    assert n_refused >= 9_000
