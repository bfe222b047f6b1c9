"""``python -m brawlkit export CHECKPOINT.zip -o POLICY.bpw``: checkpoint -> native blob.

The blob carries the actor's weights and how the policy was trained (action
repeat, input layout, reward preset: docs/bpw.md), read from the checkpoint
itself (:func:`brawlkit.export.actor.load_checkpoint`), so ``brawlpit_bot``
plays it at the cadence it learned without being told.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.common.io import atomic_write_bytes
from brawlkit.export.actor import actor_layers, checkpoint_meta, load_checkpoint, policy_std
from brawlkit.export.bpw import (
    COMPRESS_CHOICES,
    blob_kind,
    compression_report,
    encode_blob,
    pack_bpw,
    pack_mixture,
    parse_bpw,
)


def export_checkpoint(
    zip_path: str | Path, out_path: str | Path, compress: str = "none", sampled: bool = False,
    noise_scale: float = 1.0,
) -> dict[str, Any]:
    """Write the actor of SB3 checkpoint ``zip_path`` to ``out_path`` as a ``.bpw`` blob.

    ``compress``: ``none`` (raw, the default on disk) | ``lz4`` | ``shuffle`` |
    ``auto`` (the smallest).  ``sampled``: the blob also carries the policy's Gaussian
    std (times ``noise_scale``; version 3), so ``brawlpit_bot`` plays the sampled policy
    PPO trained, not its mean.  Returns a summary: layer table, how the policy was
    trained, sizes of each encoding, the chosen one.
    """
    if compress not in COMPRESS_CHOICES:
        raise ValueError(f"compress must be one of {COMPRESS_CHOICES}, not {compress!r}")
    if not noise_scale > 0:
        raise ValueError(f"--noise-scale must be > 0, got {noise_scale}")
    meta, policy = load_checkpoint(zip_path)
    std = policy_std(policy) * np.float32(noise_scale) if sampled else None
    raw = pack_bpw(actor_layers(policy), meta, noise_std=std)
    rep = compression_report(raw)
    blob = rep["_blobs"][rep["best"]] if compress == "auto" else encode_blob(raw, compress)
    out = atomic_write_bytes(out_path, blob)
    parsed = parse_bpw(raw)
    return {
        "out": str(out),
        "encoding": blob_kind(blob),
        "bytes_written": len(blob),
        "version": parsed.version,
        "action_repeat": meta.action_repeat,
        "input_layout": meta.input_layout,
        "reward": meta.reward,
        "noise_std": None if parsed.noise_std is None else [float(x) for x in parsed.noise_std],
        "layers": parsed.table(),
        **{k: v for k, v in rep.items() if k != "_blobs"},
    }


def export_mixture(zip_paths: Sequence[str | Path], out_path: str | Path,
                   sampled: bool = False, noise_scale: float = 1.0) -> dict[str, Any]:
    """Write the actors of several checkpoints as one mixture ``.bpw`` (docs/bpw.md,
    "Mixtures"): ``brawlpit_bot`` plays one of them per match, picked by the match seed.
    Returns each component's summary and the mixture's size."""
    raws, parts = [], []
    with tempfile.TemporaryDirectory(prefix="bk_mix_") as td:
        for i, z in enumerate(zip_paths):
            part = export_checkpoint(z, Path(td) / f"c{i}.bpw", sampled=sampled,
                                     noise_scale=noise_scale)
            raws.append(Path(part["out"]).read_bytes())
            parts.append({**part, "checkpoint": str(z)})
    blob = pack_mixture(raws)
    out = atomic_write_bytes(out_path, blob)
    return {"out": str(out), "mixture": len(raws), "bytes_written": len(blob),
            "components": parts}


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("export", "Export the actor of an SB3 PPO checkpoint to a .bpw blob (docs/bpw.md) "
                    "that native/build/brawlpit_bot loads.",
    )
    ap.add_argument("checkpoint", nargs="+",
                    help="SB3 PPO checkpoint zip (from `brawlkit train`); several: one mixture "
                    "blob that plays one of them per match, picked by the match seed "
                    "(docs/bpw.md, Mixtures)")
    ap.add_argument("-o", "--out", required=True, help="output .bpw path")
    ap.add_argument("--compress", choices=COMPRESS_CHOICES, default="none",
                    help="on-disk encoding: none (raw), lz4, shuffle (byte-shuffle + LZ4), "
                         "or auto (the smallest; raw when neither helps). The C loader reads all.")
    ap.add_argument("--sampled", action="store_true",
                    help="ship the sampled policy: the blob (version 3) carries the policy's "
                         "Gaussian std and brawlpit_bot adds that noise by the sampling rule of "
                         "docs/bpw.md (default: the deterministic mean, version 2)")
    ap.add_argument("--noise-scale", type=float, default=1.0,
                    help="with --sampled: multiply the std by this (default 1: as trained)")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    try:
        for c in args.checkpoint:
            checkpoint_meta(c)  # not a checkpoint: one line, before torch loads
    except (FileNotFoundError, ValueError) as e:
        print(f"brawlkit export: {e}", file=sys.stderr)
        return 2
    if len(args.checkpoint) > 1:
        if args.compress != "none":
            ap.error("a mixture is written raw: drop --compress")
        try:
            mix = export_mixture(args.checkpoint, args.out, sampled=args.sampled,
                                 noise_scale=args.noise_scale)
        except (ValueError, KeyError) as e:
            print(f"brawlkit export: {e}", file=sys.stderr)
            return 1
        print(f"wrote {mix['out']}: a mixture of {mix['mixture']} policies (one per match), "
              f"{mix['bytes_written']} bytes")
        if args.json:
            print(json.dumps(mix))
        return 0
    try:
        summary = export_checkpoint(args.checkpoint[0], args.out, compress=args.compress,
                                    sampled=args.sampled, noise_scale=args.noise_scale)
    except (ValueError, KeyError) as e:
        print(f"brawlkit export: {args.checkpoint[0]}: {e}", file=sys.stderr)
        return 1
    print(f"{'layer':<6}{'in':>6}{'out':>6}  activation")
    for i, lay in enumerate(summary["layers"]):
        print(f"{i:<6}{lay['in']:>6}{lay['out']:>6}  {lay['activation']}")
    print(f"wrote {summary['out']}: bpw v{summary['version']}, {summary['encoding']}, "
          f"{summary['bytes_written']} bytes; action repeat {summary['action_repeat']}, "
          f"input layout {summary['input_layout']}, reward {summary['reward'] or 'unknown'}; "
          + ("deterministic (the mean)" if summary["noise_std"] is None else
             "sampled, std " + " ".join(f"{x:.3g}" for x in summary["noise_std"])))
    if args.json:
        print(json.dumps(summary))
    return 0
