"""The ``.bpw`` native policy blob: write, read, validate, compress (docs/bpw.md).

Why: no game client ships a PyTorch runtime.  The actor (the Gaussian mean) is
written as a tiny versioned blob that ``native/src/policy.c`` loads at match
start; :class:`brawlkit.export.actor.NumpyPolicy` runs the same blob in Python.
The blob also says how the policy was trained (action repeat, policy input
layout, reward preset), so whoever plays it needs no flag to match training.

Raw format, version 2 (every integer u32 little-endian, every float IEEE-754
binary32 little-endian -- written with explicit ``'<'`` dtypes, never the host
order)::

    header       magic b"BPW1", u32 version (=2), u32 n_layers, u32 obs_dim, u32 act_dim,
                 u32 action_repeat, u32 input_layout, char reward[16] (NUL-padded ASCII)
    layer table  n_layers x (u32 in, u32 out, u32 activation)   activation: 0 none, 1 tanh
    payload      per layer: weight out x in float32 row-major (PyTorch's own layout,
                 no transpose), then bias out float32

Version 3 is version 2 plus a **noise section** after the payload: u32 noise kind
(1 = diagonal Gaussian) and ``act_dim`` float32 standard deviations, each finite and in
(0, 100].  A blob that carries it is the *sampled* policy: the player adds that noise to
the mean by the sampling rule of docs/bpw.md ("Sampling": splitmix64 + Box-Muller, the
same stream in C and in :class:`brawlkit.export.actor.NoiseStream`).  The exporter
writes version 2 for the deterministic policy and 3 only when it carries noise, so a
deterministic blob still loads in every older player.
Version 1 has the 20-byte header without the last three fields; it still loads,
read as action repeat 4, input layout 1 (the 31-value observation), reward unknown.
The file length must equal ``header + 12*n_layers + 4*sum(out*in + out)`` exactly
(v3: plus ``4 + 4*act_dim``).
Loader limits (same in C): 1 <= n_layers <= 16, 1 <= every dim <= 4096,
raw size <= 16 MiB, every weight and bias finite, 1 <= action_repeat <= 64,
1 <= input_layout <= 2**31 - 1.

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

numpy-only: lz4 is imported by the functions that (de)compress.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.wire.constants import C, check_action_repeat

MAGIC = b"BPW1"
SHUFFLE_MAGIC = b"BPWS"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
VERSION = int(C.BP_BPW_VERSION)
VERSIONS = (1, 2, 3)
#: the version of a blob without noise (what every player since version 2 reads)
DETERMINISTIC_VERSION = 2
SHUFFLE_VERSION = 1
ACT_NONE = 0
ACT_TANH = 1
ACTIVATIONS = {ACT_NONE: "none", ACT_TANH: "tanh"}
MAX_LAYERS = 16
MAX_DIM = 4096
MAX_RAW_BYTES = 16 << 20
REWARD_BYTES = int(C.BP_BPW_REWARD_LEN)
#: the C loader keeps the layout in an int
MAX_INPUT_LAYOUT = 0x7FFFFFFF
#: header bytes by version (v2 adds action_repeat, input_layout, reward[16])
HEADER_BYTES = {1: 20, 2: 28 + REWARD_BYTES, 3: 28 + REWARD_BYTES}
#: the v3 noise section: u32 kind, then act_dim float32 stds
NOISE_GAUSSIAN = int(C.BP_BPW_NOISE_GAUSSIAN)
MAX_NOISE_STD = float(C.BP_BPW_MAX_NOISE_STD)
LAYER_ENTRY_BYTES = 12
#: what a version-1 blob is read as (it predates the fields)
V1_ACTION_REPEAT = int(C.BP_BPW_DEFAULT_REPEAT)
V1_INPUT_LAYOUT = int(C.BP_INPUT_LAYOUT_OBS)

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
class PolicyMeta:
    """How a policy was trained, as its blob records it (what the player must match).

    ``action_repeat``: ticks per decision; ``input_layout``: which policy input
    the network expects (``BP_INPUT_LAYOUT_*``, docs/observation.md); ``reward``:
    the reward preset's name ("" = unknown, informational only).
    """

    action_repeat: int = V1_ACTION_REPEAT
    input_layout: int = V1_INPUT_LAYOUT
    reward: str = ""

    def validate(self) -> None:
        check_action_repeat(self.action_repeat, "bpw: action_repeat")
        if not 1 <= self.input_layout <= MAX_INPUT_LAYOUT:
            raise ValueError(f"bpw: input_layout {self.input_layout} outside 1..{MAX_INPUT_LAYOUT}")
        raw = self.reward.encode("ascii", errors="replace")
        if len(raw) >= REWARD_BYTES or not all(0x20 <= b <= 0x7E for b in raw):
            raise ValueError(f"bpw: reward name {self.reward!r} must be printable ASCII of at "
                             f"most {REWARD_BYTES - 1} characters")


@dataclass(frozen=True)
class Bpw:
    """A parsed ``.bpw`` blob."""

    version: int
    obs_dim: int
    act_dim: int
    layers: tuple[Layer, ...]
    meta: PolicyMeta = PolicyMeta()
    #: the sampled policy's per-action std (float32, ``act_dim``), or None: deterministic
    noise_std: np.ndarray | None = None

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


def _check_layers(layers: Sequence[Layer]) -> None:
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


def check_noise_std(std: Any, act_dim: int) -> np.ndarray:
    """The sampled policy's std as float32 ``(act_dim,)``; ``ValueError`` naming the bad value."""
    a = np.asarray(std, dtype=np.float32)
    if a.shape != (act_dim,):
        raise ValueError(f"bpw: noise std has shape {a.shape}, the actor has act_dim {act_dim}")
    bad = ~(np.isfinite(a) & (a > 0) & (a <= MAX_NOISE_STD))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"bpw: noise std[{i}] = {float(a[i])!r} outside (0, {MAX_NOISE_STD:g}]")
    return a


def pack_bpw(layers: Sequence[Layer], meta: PolicyMeta | None = None, version: int | None = None,
             noise_std: Any = None) -> bytes:
    """Serialise ``layers`` (and how they were trained) as a raw blob, explicit little-endian.

    ``noise_std`` (per-action Gaussian std) makes it the sampled policy, version 3;
    without it the blob is the deterministic policy, version 2 (``version`` None picks).
    ``version=1`` writes the old 20-byte header (compatibility tests only; it
    cannot carry ``meta``, so ``meta`` must then be the version-1 defaults).
    """
    meta = meta or PolicyMeta()
    _check_layers(layers)
    meta.validate()
    std = None if noise_std is None else check_noise_std(noise_std, layers[-1].n_out)
    if version is None:
        version = DETERMINISTIC_VERSION if std is None else VERSION
    if (std is not None) != (version == 3):
        raise ValueError(f"bpw: version {version} " + ("cannot carry noise (only version 3 does)"
                         if std is not None else "needs a noise std (version 3 is the sampled "
                         "policy; write version 2 for the deterministic one)"))
    head = struct.pack("<IIII", version, len(layers), layers[0].n_in, layers[-1].n_out)
    if version in (2, 3):
        head += struct.pack("<II", meta.action_repeat, meta.input_layout)
        head += meta.reward.encode("ascii").ljust(REWARD_BYTES, b"\0")
    elif version != 1 or meta != PolicyMeta():
        raise ValueError(f"bpw: version {version} cannot carry {meta} (version 1 has no such "
                         f"fields; only versions 2 and 3 are written for use)")
    parts = [MAGIC, head]
    for lay in layers:
        parts.append(struct.pack("<III", lay.n_in, lay.n_out, lay.activation))
    for lay in layers:
        parts.append(np.ascontiguousarray(lay.weight, dtype="<f4").tobytes(order="C"))
        parts.append(np.ascontiguousarray(lay.bias, dtype="<f4").tobytes())
    if std is not None:
        parts.append(struct.pack("<I", NOISE_GAUSSIAN) + std.astype("<f4").tobytes())
    raw = b"".join(parts)
    if len(raw) > MAX_RAW_BYTES:
        raise ValueError(f"bpw: blob of {len(raw)} bytes exceeds {MAX_RAW_BYTES}")
    return raw


def _parse_meta(raw: bytes, version: int) -> PolicyMeta:
    if version == 1:
        return PolicyMeta()
    repeat, layout = struct.unpack_from("<II", raw, 20)
    field = raw[28:28 + REWARD_BYTES]
    nul = field.find(b"\0")
    if nul < 0:
        raise ValueError("bpw: reward field is not NUL-terminated")
    if field[nul:].strip(b"\0"):
        raise ValueError("bpw: reward field has bytes after its NUL terminator")
    name = field[:nul]
    if not all(0x20 <= b <= 0x7E for b in name):
        raise ValueError(f"bpw: reward field {name!r} is not printable ASCII")
    meta = PolicyMeta(repeat, layout, name.decode("ascii"))
    meta.validate()
    return meta


def _parse_table(raw: bytes, n_layers: int, obs_dim: int, act_dim: int,
                 table_start: int) -> tuple[list[tuple[int, int, int]], int]:
    """The layer table as (in, out, activation) rows, and the total size it implies."""
    dims: list[tuple[int, int, int]] = []
    prev = obs_dim
    total = table_start + LAYER_ENTRY_BYTES * n_layers
    for i in range(n_layers):
        n_in, n_out, act = struct.unpack_from("<III", raw, table_start + LAYER_ENTRY_BYTES * i)
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
    return dims, total


def parse_bpw(raw: bytes) -> Bpw:
    """Parse and validate a raw ``BPW1`` blob (version 1, 2 or 3); ``ValueError`` says what is
    wrong."""
    raw = bytes(raw)
    n = len(raw)
    if n < HEADER_BYTES[1]:
        raise ValueError(f"bpw: truncated header ({n} bytes < {HEADER_BYTES[1]})")
    if raw[:4] != MAGIC:
        raise ValueError(f"bpw: bad magic {raw[:4]!r} (want {MAGIC!r})")
    version, n_layers, obs_dim, act_dim = struct.unpack_from("<IIII", raw, 4)
    if version not in VERSIONS:
        raise ValueError(f"bpw: unknown version {version} (this reader knows {VERSIONS})")
    head = HEADER_BYTES[version]
    if n < head:
        raise ValueError(f"bpw: truncated version-{version} header ({n} bytes < {head})")
    if not 1 <= n_layers <= MAX_LAYERS:
        raise ValueError(f"bpw: n_layers {n_layers} outside 1..{MAX_LAYERS}")
    if not (1 <= obs_dim <= MAX_DIM and 1 <= act_dim <= MAX_DIM):
        raise ValueError(f"bpw: obs_dim {obs_dim} / act_dim {act_dim} outside 1..{MAX_DIM}")
    meta = _parse_meta(raw, version)
    table_end = head + LAYER_ENTRY_BYTES * n_layers
    if n < table_end:
        raise ValueError(f"bpw: truncated layer table ({n} bytes < {table_end})")
    dims, total = _parse_table(raw, n_layers, obs_dim, act_dim, head)
    payload_end = total
    if version == 3:
        total += 4 + 4 * act_dim
    if total > MAX_RAW_BYTES:
        raise ValueError(f"bpw: table implies {total} bytes > limit {MAX_RAW_BYTES}")
    if n < total:
        what = "payload" if n < payload_end else "noise section"
        raise ValueError(f"bpw: truncated {what} ({n} bytes, table says {total})")
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
    std = None
    if version == 3:
        (kind,) = struct.unpack_from("<I", raw, off)
        if kind != NOISE_GAUSSIAN:
            raise ValueError(f"bpw: unknown noise kind {kind} (this reader knows "
                             f"{NOISE_GAUSSIAN}: diagonal Gaussian)")
        std = check_noise_std(np.frombuffer(raw, dtype="<f4", count=act_dim, offset=off + 4),
                              act_dim)
    return Bpw(version, obs_dim, act_dim, tuple(layers), meta, std)


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
    if raw_len % 4 or not HEADER_BYTES[1] <= raw_len <= MAX_RAW_BYTES:
        raise ValueError(f"bpw: BPWS raw_len {raw_len} invalid")
    shuffled = _lz4_decompress(data[12:], "shuffle")
    if len(shuffled) != raw_len:
        raise ValueError(f"bpw: BPWS raw_len {raw_len} != decompressed {len(shuffled)}")
    return unshuffle_bytes(shuffled)


def read_bpw(data: bytes) -> Bpw:
    """Parse a blob in any encoding (a mixture is refused by name: its components are
    :func:`split_mixture`'s)."""
    if bytes(data[:4]) == MIX_MAGIC:
        raise ValueError("bpw: a mixture of policies (BPWM), one played per match; this reader "
                         "takes one policy (split_mixture gives its components)")
    return parse_bpw(unwrap_blob(data))


# ------------------------------------------------------------------ mixtures
MIX_MAGIC = b"BPWM"
MIX_VERSION = int(C.BP_BPW_MIX_VERSION)
MIX_MAX = int(C.BP_BPW_MIX_MAX)
MIX_SALT = int(C.BP_BPW_MIX_SALT)


def pack_mixture(blobs: Sequence[bytes]) -> bytes:
    """A mixture container of 2..``MIX_MAX`` raw blobs (docs/bpw.md, "Mixtures"): the
    player plays one of them per match, :func:`mixture_pick` of the match seed.  Why a
    mixture: a deterministic policy can be answered move for move, and a uniform mixture
    of Mains hardened against each other's exploiters is what the double oracle returns
    (README, "How hard is it to exploit?").  ``ValueError`` when the components disagree
    on what a player needs to know (input, output, cadence, input layout, version)."""
    raws = [unwrap_blob(b) for b in blobs]
    if not 2 <= len(raws) <= MIX_MAX:
        raise ValueError(f"bpw: a mixture holds 2..{MIX_MAX} policies, got {len(raws)}")
    parsed = [parse_bpw(r) for r in raws]
    first = parsed[0]
    for i, b in enumerate(parsed[1:], 1):
        for what in ("obs_dim", "act_dim", "version"):
            if getattr(b, what) != getattr(first, what):
                raise ValueError(f"bpw: mixture component {i} has {what} {getattr(b, what)}, "
                                 f"component 0 {getattr(first, what)}: they must agree")
        for what in ("action_repeat", "input_layout"):
            if getattr(b.meta, what) != getattr(first.meta, what):
                raise ValueError(f"bpw: mixture component {i} has {what} "
                                 f"{getattr(b.meta, what)}, component 0 "
                                 f"{getattr(first.meta, what)}: they must agree")
    out = bytearray(MIX_MAGIC + struct.pack("<II", MIX_VERSION, len(raws)))
    for r in raws:
        out += struct.pack("<I", len(r)) + r
    return bytes(out)


def split_mixture(data: bytes) -> list[bytes]:
    """The raw component blobs of a mixture (each validated); a single blob in any
    encoding is a mixture of one.  ``ValueError`` naming what is wrong, as the C loader
    refuses it."""
    data = bytes(data)
    if data[:4] != MIX_MAGIC:
        raw = unwrap_blob(data)
        parse_bpw(raw)
        return [raw]
    if len(data) < 12:
        raise ValueError(f"bpw: truncated BPWM header ({len(data)} bytes < 12)")
    ver, k = struct.unpack_from("<II", data, 4)
    if ver != MIX_VERSION:
        raise ValueError(f"bpw: unknown BPWM version {ver} (this reader knows {MIX_VERSION})")
    if not 2 <= k <= MIX_MAX:
        raise ValueError(f"bpw: BPWM count {k} outside 2..{MIX_MAX}")
    pos, raws = 12, []
    for i in range(k):
        if pos + 4 > len(data):
            raise ValueError(f"bpw: BPWM truncated before component {i}'s length")
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if n % 4 or n > len(data) - pos:
            raise ValueError(f"bpw: BPWM component {i}'s length {n} invalid "
                             f"({len(data) - pos} bytes left)")
        if data[pos:pos + 4] != MAGIC:
            raise ValueError(f"bpw: BPWM component {i} is not a raw BPW1 blob")
        raws.append(data[pos:pos + n])
        pos += n
    if pos != len(data):
        raise ValueError(f"bpw: BPWM has {len(data) - pos} bytes after its last component")
    pack_mixture(raws)  # each component parsed, and the components agree
    return raws


def mixture_pick(seed: int, k: int) -> int:
    """Which of ``k`` components plays the match of ``seed``: ``floor(u * k)``, ``u`` the
    first uniform of the sampling rule's stream seeded ``seed ^ MIX_SALT`` — the rule
    ``brawlpit_bot`` follows (``bp_policy_select``), so a match replays with the same one."""
    from brawlkit.export.actor import NoiseStream  # actor imports this module

    u = float(NoiseStream((int(seed) & 0xFFFF_FFFF_FFFF_FFFF) ^ MIX_SALT).uniforms(1)[0])
    return min(int(u * k), k - 1)


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
