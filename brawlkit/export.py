"""Export an SB3 PPO actor to the native ``.bpw`` blob, read it back, run it in numpy.

Why: no game client ships a PyTorch runtime.  The actor (``mlp_extractor.policy_net``
+ ``action_net``, i.e. the Gaussian mean) is written as a tiny versioned blob that
``native/src/policy.c`` loads at match start; the numpy forward here is the same
format run in Python, used by the league for frozen opponents.

Raw format (DESIGN.md §10, normative; every integer u32 little-endian, every
float IEEE-754 binary32 little-endian -- written with explicit ``'<'`` dtypes,
never the host order)::

    header       magic b"BPW1", u32 version (=1), u32 n_layers, u32 obs_dim, u32 act_dim
    layer table  n_layers x (u32 in, u32 out, u32 activation)   activation: 0 none, 1 tanh
    payload      per layer: weight out x in float32 row-major (PyTorch's own layout,
                 no transpose), then bias out float32

The file length must equal ``20 + 12*n_layers + 4*sum(out*in + out)`` exactly.
Loader limits (same in C): 1 <= n_layers <= 16, 1 <= every dim <= 4096,
raw size <= 16 MiB, every weight and bias finite.

Transport encodings (the loaders in Python and C recognise all three by the first
four bytes):

=============  ============================  ===================================
first bytes    encoding                      body
=============  ============================  ===================================
``BPW1``       raw                           the format above
04 22 4D 18    LZ4 frame (magic 0x184D2204)  LZ4 frame whose content is a raw blob
``BPWS``       byte-shuffled + LZ4           u32 wrapper version (=1), u32 raw_len,
                                             then one LZ4 frame whose content is
                                             shuffle(raw blob), exactly raw_len bytes
=============  ============================  ===================================

shuffle: the raw blob (always a multiple of 4 bytes) read as n = raw_len/4 words;
``shuffled[k*n + i] = raw[4*i + k]`` for k in 0..3 -- all first bytes of every word,
then all second bytes, ...  Exponent/sign bytes of float weights are alike, so the
grouped byte planes give LZ4 something to match.  Frames are written with a content
checksum and the stored content size; the decoders refuse a frame that does not end
exactly at the end of the input or whose content is bigger than the 16 MiB limit.

Corruption policy: a blob whose header, table or size is wrong, or that is
truncated, is refused with a ``ValueError`` naming what is wrong.  The raw format has
no checksum, so a bit flip in the float payload that leaves every value finite is
*accepted* (it is a different, valid network); one that makes a value NaN/Inf is
refused.  Compressed encodings carry the LZ4 content checksum, so any flip in them is
refused.

Action decoding (DESIGN §6) lives in :func:`decode_action`, the one Python place for
it; ``bp_action_decode`` in C is its twin (tested against it).

numpy-only at import time: torch and stable_baselines3 are imported inside the
functions that need them.
"""

from __future__ import annotations

import struct
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"BPW1"
SHUFFLE_MAGIC = b"BPWS"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
VERSION = 1
SHUFFLE_VERSION = 1
ACT_NONE = 0
ACT_TANH = 1
ACTIVATIONS = {ACT_NONE: "none", ACT_TANH: "tanh"}
MAX_LAYERS = 16
MAX_DIM = 4096
MAX_RAW_BYTES = 16 << 20
HEADER_BYTES = 20
LAYER_ENTRY_BYTES = 12

BTN_JUMP, BTN_ATTACK, BTN_SPECIAL, BTN_SHIELD = 1, 2, 4, 8

COMPRESS_CHOICES = ("none", "lz4", "shuffle", "auto")


# ----------------------------------------------------------------- data model


@dataclass(frozen=True)
class Layer:
    """One dense layer: ``y = act(W @ x + b)``; ``weight`` is (out, in) float32."""

    weight: np.ndarray
    bias: np.ndarray
    activation: int

    @property
    def n_in(self) -> int:
        return int(self.weight.shape[1])

    @property
    def n_out(self) -> int:
        return int(self.weight.shape[0])


@dataclass(frozen=True)
class Bpw:
    """A parsed ``.bpw`` blob."""

    version: int
    obs_dim: int
    act_dim: int
    layers: tuple[Layer, ...]

    def table(self) -> list[dict[str, Any]]:
        """The layer table as rows (for notebooks / the CLI)."""
        return [
            {
                "layer": i,
                "in": lay.n_in,
                "out": lay.n_out,
                "activation": ACTIVATIONS[lay.activation],
                "params": lay.n_in * lay.n_out + lay.n_out,
                "bytes": 4 * (lay.n_in * lay.n_out + lay.n_out),
            }
            for i, lay in enumerate(self.layers)
        ]


# ----------------------------------------------------------------- raw writer / reader


def pack_bpw(layers: Sequence[Layer]) -> bytes:
    """Serialise ``layers`` as a raw ``BPW1`` blob (explicit little-endian)."""
    if not 1 <= len(layers) <= MAX_LAYERS:
        raise ValueError(f"bpw: n_layers {len(layers)} outside 1..{MAX_LAYERS}")
    prev_out: int | None = None
    for i, lay in enumerate(layers):
        w, b = np.asarray(lay.weight), np.asarray(lay.bias)
        if w.ndim != 2 or b.shape != (w.shape[0],):
            raise ValueError(f"bpw: layer {i} weight {w.shape} / bias {b.shape} mismatch")
        if not (1 <= w.shape[0] <= MAX_DIM and 1 <= w.shape[1] <= MAX_DIM):
            raise ValueError(f"bpw: layer {i} dims {w.shape} outside 1..{MAX_DIM}")
        if prev_out is not None and w.shape[1] != prev_out:
            raise ValueError(f"bpw: layer {i} in={w.shape[1]} != previous out={prev_out}")
        if lay.activation not in ACTIVATIONS:
            raise ValueError(f"bpw: layer {i} unknown activation {lay.activation}")
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise ValueError(f"bpw: layer {i} has non-finite weights")
        prev_out = int(w.shape[0])
    parts = [
        MAGIC,
        struct.pack("<IIII", VERSION, len(layers), layers[0].n_in, layers[-1].n_out),
    ]
    for lay in layers:
        parts.append(struct.pack("<III", lay.n_in, lay.n_out, lay.activation))
    for lay in layers:
        parts.append(np.ascontiguousarray(lay.weight, dtype="<f4").tobytes(order="C"))
        parts.append(np.ascontiguousarray(lay.bias, dtype="<f4").tobytes())
    raw = b"".join(parts)
    if len(raw) > MAX_RAW_BYTES:
        raise ValueError(f"bpw: blob of {len(raw)} bytes exceeds {MAX_RAW_BYTES}")
    return raw


def parse_bpw(raw: bytes) -> Bpw:
    """Parse and validate a raw ``BPW1`` blob; ``ValueError`` says what is wrong."""
    raw = bytes(raw)
    n = len(raw)
    if n < HEADER_BYTES:
        raise ValueError(f"bpw: truncated header ({n} bytes < {HEADER_BYTES})")
    if raw[:4] != MAGIC:
        raise ValueError(f"bpw: bad magic {raw[:4]!r} (want {MAGIC!r})")
    version, n_layers, obs_dim, act_dim = struct.unpack_from("<IIII", raw, 4)
    if version != VERSION:
        raise ValueError(f"bpw: unknown version {version} (this reader knows {VERSION})")
    if not 1 <= n_layers <= MAX_LAYERS:
        raise ValueError(f"bpw: n_layers {n_layers} outside 1..{MAX_LAYERS}")
    if not (1 <= obs_dim <= MAX_DIM and 1 <= act_dim <= MAX_DIM):
        raise ValueError(f"bpw: obs_dim {obs_dim} / act_dim {act_dim} outside 1..{MAX_DIM}")
    table_end = HEADER_BYTES + LAYER_ENTRY_BYTES * n_layers
    if n < table_end:
        raise ValueError(f"bpw: truncated layer table ({n} bytes < {table_end})")
    dims: list[tuple[int, int, int]] = []
    prev = obs_dim
    total = table_end
    for i in range(n_layers):
        n_in, n_out, act = struct.unpack_from("<III", raw, HEADER_BYTES + LAYER_ENTRY_BYTES * i)
        if not (1 <= n_in <= MAX_DIM and 1 <= n_out <= MAX_DIM):
            raise ValueError(f"bpw: layer {i} dims in={n_in} out={n_out} outside 1..{MAX_DIM}")
        if n_in != prev:
            what = "obs_dim" if i == 0 else "previous layer out"
            raise ValueError(f"bpw: layer {i} in={n_in} != {what}={prev}")
        if act not in ACTIVATIONS:
            raise ValueError(f"bpw: layer {i} unknown activation {act}")
        dims.append((n_in, n_out, act))
        total += 4 * (n_in * n_out + n_out)
        prev = n_out
    if prev != act_dim:
        raise ValueError(f"bpw: last layer out={prev} != act_dim={act_dim}")
    if total > MAX_RAW_BYTES:
        raise ValueError(f"bpw: table implies {total} bytes > limit {MAX_RAW_BYTES}")
    if n < total:
        raise ValueError(f"bpw: truncated payload ({n} bytes, table says {total})")
    if n > total:
        raise ValueError(f"bpw: size mismatch ({n} bytes, table says {total}; trailing data)")
    layers = []
    off = table_end
    for i, (n_in, n_out, act) in enumerate(dims):
        w = np.frombuffer(raw, dtype="<f4", count=n_in * n_out, offset=off)
        off += 4 * n_in * n_out
        b = np.frombuffer(raw, dtype="<f4", count=n_out, offset=off)
        off += 4 * n_out
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise ValueError(f"bpw: layer {i} has non-finite weights")
        layers.append(
            Layer(w.reshape(n_out, n_in).astype(np.float32), b.astype(np.float32), act)
        )
    return Bpw(version, obs_dim, act_dim, tuple(layers))


# ----------------------------------------------------------------- transport encodings


def shuffle_bytes(raw: bytes) -> bytes:
    """Group byte k of every 4-byte word together (k = 0..3)."""
    if len(raw) % 4:
        raise ValueError(f"shuffle: length {len(raw)} is not a multiple of 4")
    a = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 4)
    return a.T.copy().tobytes()


def unshuffle_bytes(data: bytes) -> bytes:
    """Inverse of :func:`shuffle_bytes`."""
    if len(data) % 4:
        raise ValueError(f"unshuffle: length {len(data)} is not a multiple of 4")
    a = np.frombuffer(data, dtype=np.uint8).reshape(4, -1)
    return a.T.copy().tobytes()


def _lz4_compress(data: bytes) -> bytes:
    import lz4.frame

    return lz4.frame.compress(
        data,
        compression_level=lz4.frame.COMPRESSIONLEVEL_MAX,
        content_checksum=True,
        store_size=True,
    )


def _lz4_decompress(frame: bytes, what: str) -> bytes:
    import lz4.frame

    d = lz4.frame.LZ4FrameDecompressor()
    try:
        out = d.decompress(frame, max_length=MAX_RAW_BYTES + 1)
    except RuntimeError as e:
        raise ValueError(f"bpw: {what}: corrupt LZ4 frame ({e})") from e
    if len(out) > MAX_RAW_BYTES:
        raise ValueError(f"bpw: {what}: decompressed size exceeds {MAX_RAW_BYTES}")
    if not d.eof:
        raise ValueError(f"bpw: {what}: truncated LZ4 frame")
    if d.unused_data:
        raise ValueError(f"bpw: {what}: {len(d.unused_data)} trailing bytes after LZ4 frame")
    return bytes(out)


def compress_lz4(raw: bytes) -> bytes:
    """LZ4 frame of the raw blob (content checksum, stored size)."""
    return _lz4_compress(raw)


def compress_shuffled(raw: bytes) -> bytes:
    """``BPWS`` wrapper: byte-shuffle then LZ4 frame (see module docstring)."""
    return SHUFFLE_MAGIC + struct.pack("<II", SHUFFLE_VERSION, len(raw)) + _lz4_compress(
        shuffle_bytes(raw)
    )


def blob_kind(data: bytes) -> str:
    """``"raw"``, ``"lz4"`` or ``"shuffle"`` from the first four bytes; ValueError otherwise."""
    head = bytes(data[:4])
    if head == MAGIC:
        return "raw"
    if head == LZ4_FRAME_MAGIC:
        return "lz4"
    if head == SHUFFLE_MAGIC:
        return "shuffle"
    raise ValueError(f"bpw: unknown blob magic {head!r} (want BPW1, LZ4 frame or BPWS)")


def unwrap_blob(data: bytes) -> bytes:
    """Any transport encoding -> the raw ``BPW1`` bytes (not yet validated)."""
    data = bytes(data)
    kind = blob_kind(data)
    if kind == "raw":
        return data
    if kind == "lz4":
        return _lz4_decompress(data, "lz4")
    if len(data) < 12:
        raise ValueError(f"bpw: truncated BPWS header ({len(data)} bytes < 12)")
    ver, raw_len = struct.unpack_from("<II", data, 4)
    if ver != SHUFFLE_VERSION:
        raise ValueError(f"bpw: unknown BPWS version {ver} (this reader knows {SHUFFLE_VERSION})")
    if raw_len % 4 or not HEADER_BYTES <= raw_len <= MAX_RAW_BYTES:
        raise ValueError(f"bpw: BPWS raw_len {raw_len} invalid")
    shuffled = _lz4_decompress(data[12:], "shuffle")
    if len(shuffled) != raw_len:
        raise ValueError(f"bpw: BPWS raw_len {raw_len} != decompressed {len(shuffled)}")
    return unshuffle_bytes(shuffled)


def read_bpw(data: bytes) -> Bpw:
    """Parse a blob in any encoding."""
    return parse_bpw(unwrap_blob(data))


def load_bpw(path: str | Path) -> Bpw:
    return read_bpw(Path(path).read_bytes())


def compression_report(raw: bytes) -> dict[str, Any]:
    """Sizes of raw / lz4 / shuffle+lz4 and the best encoding (raw unless one is smaller)."""
    lz = compress_lz4(raw)
    sh = compress_shuffled(raw)
    sizes = {"raw": len(raw), "lz4": len(lz), "shuffle": len(sh)}
    best = min(("raw", "lz4", "shuffle"), key=lambda k: (sizes[k], k != "raw"))
    return {
        "raw_bytes": len(raw),
        "lz4_bytes": len(lz),
        "shuffle_lz4_bytes": len(sh),
        "lz4_ratio": len(lz) / len(raw),
        "shuffle_lz4_ratio": len(sh) / len(raw),
        "best": best,
        "_blobs": {"raw": raw, "lz4": lz, "shuffle": sh},
    }


def encode_blob(raw: bytes, compress: str = "none") -> bytes:
    """Encode a raw blob: ``none`` | ``lz4`` | ``shuffle`` | ``auto`` (smallest, raw on tie)."""
    if compress == "none":
        return raw
    if compress == "lz4":
        return compress_lz4(raw)
    if compress == "shuffle":
        return compress_shuffled(raw)
    if compress == "auto":
        rep = compression_report(raw)
        blob: bytes = rep["_blobs"][rep["best"]]
        return blob
    raise ValueError(f"compress must be one of {COMPRESS_CHOICES}, not {compress!r}")


# ----------------------------------------------------------------- SB3 -> layers


def actor_layers(policy: Any) -> list[Layer]:
    """The actor of an SB3 ``ActorCriticPolicy`` as dense layers (mean head last).

    Accepts only what the format can express: a flatten features extractor, a
    ``policy_net`` of Linear/Tanh modules, a Linear ``action_net``.
    """
    import torch
    from stable_baselines3.common.torch_layers import FlattenExtractor

    fx = getattr(policy, "pi_features_extractor", None) or policy.features_extractor
    if not isinstance(fx, FlattenExtractor):
        raise ValueError(f"export: features extractor {type(fx).__name__} is not FlattenExtractor")
    mods = list(policy.mlp_extractor.policy_net) + [policy.action_net]
    layers: list[Layer] = []
    pending: tuple[np.ndarray, np.ndarray] | None = None
    for m in mods:
        if isinstance(m, torch.nn.Linear):
            if pending is not None:
                layers.append(Layer(pending[0], pending[1], ACT_NONE))
            w = m.weight.detach().cpu().to(torch.float32).numpy().copy()
            if m.bias is not None:
                b = m.bias.detach().cpu().to(torch.float32).numpy().copy()
            else:
                b = np.zeros(w.shape[0], np.float32)
            pending = (w, b)
        elif isinstance(m, torch.nn.Tanh):
            if pending is None:
                raise ValueError("export: Tanh without a preceding Linear")
            layers.append(Layer(pending[0], pending[1], ACT_TANH))
            pending = None
        else:
            raise ValueError(f"export: unsupported actor module {type(m).__name__}")
    if pending is not None:
        layers.append(Layer(pending[0], pending[1], ACT_NONE))
    return layers


def load_sb3_policy(zip_path: str | Path) -> Any:
    """Load the SB3 PPO policy of a checkpoint zip on CPU."""
    from stable_baselines3 import PPO

    if not zipfile.is_zipfile(zip_path):
        raise ValueError(f"export: {zip_path} is not a zip checkpoint")
    model = PPO.load(str(zip_path), device="cpu")
    return model.policy


def export_checkpoint(
    zip_path: str | Path, out_path: str | Path, compress: str = "none"
) -> dict[str, Any]:
    """Write the actor of SB3 checkpoint ``zip_path`` to ``out_path`` as a ``.bpw`` blob.

    ``compress``: ``none`` (raw BPW1, the default on disk) | ``lz4`` | ``shuffle`` |
    ``auto``.  Returns a summary: layer table, sizes of each encoding, chosen one.
    """
    if compress not in COMPRESS_CHOICES:
        raise ValueError(f"compress must be one of {COMPRESS_CHOICES}, not {compress!r}")
    policy = load_sb3_policy(zip_path)
    raw = pack_bpw(actor_layers(policy))
    rep = compression_report(raw)
    blob = rep["_blobs"][rep["best"]] if compress == "auto" else encode_blob(raw, compress)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(blob)
    tmp.replace(out)
    sizes = {k: v for k, v in rep.items() if k != "_blobs"}
    return {
        "out": str(out),
        "encoding": blob_kind(blob),
        "bytes_written": len(blob),
        "layers": parse_bpw(raw).table(),
        **sizes,
    }


# ----------------------------------------------------------------- numpy forward


class NumpyPolicy:
    """The actor of a ``.bpw`` blob in numpy: ``policy(obs) -> clipped action``.

    ``source`` is a path, the blob bytes (any encoding) or a parsed :class:`Bpw`.
    ``forward`` returns the Gaussian mean (unclipped); ``act`` / ``__call__`` clip it
    to [-1, 1] (deterministic play, DESIGN §6).  Both accept (obs_dim,) or (N, obs_dim).
    """

    def __init__(self, source: str | Path | bytes | Bpw):
        if isinstance(source, Bpw):
            self.bpw = source
        elif isinstance(source, bytes | bytearray | memoryview):
            self.bpw = read_bpw(bytes(source))
        else:
            self.bpw = load_bpw(source)
        self.obs_dim = self.bpw.obs_dim
        self.act_dim = self.bpw.act_dim
        self._wt = [np.ascontiguousarray(lay.weight.T) for lay in self.bpw.layers]
        self._b = [lay.bias for lay in self.bpw.layers]
        self._act = [lay.activation for lay in self.bpw.layers]

    def forward(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        if x.shape[-1] != self.obs_dim:
            raise ValueError(f"obs last dim {x.shape[-1]} != obs_dim {self.obs_dim}")
        for wt, b, act in zip(self._wt, self._b, self._act, strict=True):
            x = x @ wt + b
            if act == ACT_TANH:
                x = np.tanh(x)
        return x

    def act(self, obs: np.ndarray) -> np.ndarray:
        return np.clip(self.forward(obs), -1.0, 1.0).astype(np.float32)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.act(obs)


# ----------------------------------------------------------------- action decoding


def decode_action(a: Sequence[float] | np.ndarray) -> tuple[float, float, int]:
    """DESIGN §6: action vector -> (stick_x, stick_y, buttons).

    stick = clip(a[0..1], -1, 1) in float32 (NaN -> 0.0); button bit i (JUMP=1,
    ATTACK=2, SPECIAL=4, SHIELD=8) set iff a[2+i] > 0 (NaN -> not pressed).
    ``bp_action_decode`` in native/src/policy.c is the identical C rule.
    """
    # Widen the float32 values to Python floats once (exact), then decide in
    # plain Python: this runs every env step, where numpy scalar ops cost ~10 us.
    v = np.asarray(a, dtype=np.float32).reshape(-1).tolist()
    if len(v) < 6:
        raise ValueError(f"action needs 6 values, got {len(v)}")
    sx, sy = v[0], v[1]
    # clip of a float32 value to [-1, 1] is again a float32 value: no re-rounding;
    # NaN (x != x) -> 0.0
    sx = 0.0 if sx != sx else (-1.0 if sx < -1.0 else (1.0 if sx > 1.0 else sx))
    sy = 0.0 if sy != sy else (-1.0 if sy < -1.0 else (1.0 if sy > 1.0 else sy))
    buttons = ((v[2] > 0.0) | ((v[3] > 0.0) << 1) | ((v[4] > 0.0) << 2) | ((v[5] > 0.0) << 3))
    return sx, sy, int(buttons)


# ----------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    """``python -m brawlkit export CHECKPOINT.zip -o POLICY.bpw [--compress ...] [--json]``."""
    import argparse
    import json

    ap = argparse.ArgumentParser(
        prog="python -m brawlkit export",
        description="Export the actor of an SB3 PPO checkpoint to a .bpw blob (DESIGN §10) "
                    "that native/build/brawlpit_bot loads.",
    )
    ap.add_argument("checkpoint", help="SB3 PPO checkpoint zip (from `brawlkit train`)")
    ap.add_argument("-o", "--out", required=True, help="output .bpw path")
    ap.add_argument("--compress", choices=COMPRESS_CHOICES, default="none",
                    help="on-disk encoding: none (raw BPW1), lz4, shuffle (byte-shuffle + LZ4), "
                         "or auto (the smallest; raw when neither helps). The C loader reads all.")
    ap.add_argument("--json", action="store_true", help="one JSON object on the last line")
    args = ap.parse_args(argv)
    if not Path(args.checkpoint).is_file():
        ap.error(f"checkpoint {args.checkpoint} does not exist")
    try:
        summary = export_checkpoint(args.checkpoint, args.out, compress=args.compress)
    except (ValueError, KeyError) as e:
        print(f"brawlkit export: {args.checkpoint}: {e}", file=sys.stderr)
        return 1
    print(f"{'layer':<6}{'in':>6}{'out':>6}  activation")
    for i, lay in enumerate(summary["layers"]):
        print(f"{i:<6}{lay['in']:>6}{lay['out']:>6}  {lay['activation']}")
    print(f"wrote {summary['out']}: {summary['encoding']}, {summary['bytes_written']} bytes")
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if isinstance(v, str | int | float | list | dict)}))
    return 0
