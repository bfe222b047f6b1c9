"""``python -m brawlkit replay FILE [--out match.gif|match.mp4]``: check and render a replay.

Without ``--out`` it reads the file, re-simulates it and says whether it
reproduces (exit 1 if not); with ``--out`` it also renders it.  ``--json``
prints one JSON object on the last line (header fields, verification, output).
docs/replays.md describes the file and the guarantee.
"""

from __future__ import annotations

import argparse
import json
import sys

from brawlkit.common.cli_args import add_json_flag, add_progress_flag, command_parser
from brawlkit.replay.format import read_replay, result_text
from brawlkit.replay.play import ReplayMismatch, verify
from brawlkit.replay.render import (
    DEFAULT_EVERY,
    DEFAULT_FPS,
    DEFAULT_HOLD_S,
    DEFAULT_WIDTH_PX,
    RenderError,
    render_replay,
)


def _parser() -> argparse.ArgumentParser:

    p = command_parser("replay", "Verify a .bpr replay bit for bit by re-simulating it, and render it "
                    "to a GIF or MP4 (docs/replays.md).")
    p.add_argument("file", help="the .bpr file (brawlpit_server --record DIR writes them)")
    p.add_argument("--out", help="render to this .gif or .mp4 (mp4 needs ffmpeg on PATH)")
    p.add_argument("--fps", type=int, default=DEFAULT_FPS,
                   help=f"frames per second of the video (default {DEFAULT_FPS})")
    p.add_argument("--every", type=int, default=DEFAULT_EVERY,
                   help=f"draw every K-th tick (default {DEFAULT_EVERY}: with 20 fps, real time)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--width", type=int, default=None,
                      help=f"frame width in pixels, 64..4096 (default {DEFAULT_WIDTH_PX})")
    size.add_argument("--scale", type=float, default=None,
                      help=f"frame size as a multiple of the default {DEFAULT_WIDTH_PX} px "
                           "(0.5: half the width, about a quarter of the pixels and of the file)")
    p.add_argument("--hold", type=float, default=DEFAULT_HOLD_S,
                   help=f"seconds the final frame with the result stays (default {DEFAULT_HOLD_S})")
    p.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="re-simulate and compare the final hash and players first (default on; "
                        "--no-verify renders a replay that does not reproduce, e.g. from another "
                        "simulation build)")
    add_progress_flag(p)
    add_json_flag(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        replay = read_replay(args.file)
    except (OSError, ValueError) as e:
        print(f"replay: {e}", file=sys.stderr)
        return 1
    print(replay.describe())
    info: dict[str, object] = {
        "file": str(replay.path), "seed": replay.seed, "match_id": replay.match_id,
        "arena_id": replay.arena_id, "mode": replay.mode, "cpu_level": replay.cpu_level,
        "names": list(replay.names), "n_ticks": replay.n_ticks, "n_runs": replay.n_runs,
        "complete": replay.complete, "winner": replay.winner, "result": result_text(replay),
        "final_hash": f"{replay.final_hash:#018x}", "start_unix_ms": replay.start_unix_ms,
        "verified": None, "out": None,
    }
    rc = 0
    if args.verify:
        try:
            verify(replay)
            info["verified"] = True
            print(f"verified: {replay.n_ticks} ticks re-simulated, final hash "
                  f"{replay.final_hash:#018x} and both fighters equal the recording")
        except ReplayMismatch as e:
            info["verified"] = False
            print(f"replay: {e}", file=sys.stderr)
            rc = 1
    if args.out and rc == 0:

        try:
            out = render_replay(replay, args.out, fps=args.fps, every=args.every,
                                hold_s=args.hold, width=args.width, scale=args.scale,
                                check=False, progress=not args.no_progress)
        except (RenderError, ValueError) as e:
            print(f"replay: {e}", file=sys.stderr)
            return 1
        info["out"] = str(out)
        info["bytes"] = out.stat().st_size
        print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)")
    if args.json:
        print(json.dumps(info))
    return rc
