"""``python -m brawlkit elo --league-dir DIR [--json]``: the league's ratings table.

Reads the league directory through :class:`brawlkit.league.directory.LeagueDir`
(its members and its match log, in the pool's deterministic replay order) and
recomputes every rating from the log (:mod:`brawlkit.league.ratings`): the
live Elo replayed match by match and the order-independent Bradley–Terry
strength with its bootstrap interval.  Nothing is stored, so the ratings
survive any restart and two machines reading the same directory agree.
docs/ratings.md documents the formulas and the JSON.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import format_table, league_table


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("elo", "The league's ratings, recomputed from the league directory's match log "
        "on every run (nothing is stored, so they survive any restart): the live Elo replayed "
        "match by match in the log's order, and the order-independent Bradley-Terry strength "
        "with a bootstrap 95 % interval. One row per member (the permanent baseline and "
        "CPU levels included), by Elo, highest first. docs/ratings.md has the formulas.",
    )
    ap.add_argument("--league-dir", required=True, help="the league directory (members and match log)")
    ap.add_argument("--k", type=float, default=32.0, help="Elo K factor (default 32)")
    ap.add_argument("--initial", type=float, default=1200.0,
                    help="rating of a member before its first game, and the mean of all (default 1200)")
    ap.add_argument("--bootstrap", type=int, default=200,
                    help="Bradley-Terry bootstrap resamples for the interval; 0 = none (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (default 0)")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    if not (math.isfinite(args.k) and args.k >= 0):
        ap.error(f"--k must be a finite number >= 0, got {args.k}")
    if not math.isfinite(args.initial):
        ap.error(f"--initial must be finite, got {args.initial}")
    if args.bootstrap < 0:
        ap.error(f"--bootstrap must be >= 0, got {args.bootstrap}")
    root = Path(args.league_dir)
    try:
        league = LeagueDir(root, create=False)  # refuses what is not a league
    except FileNotFoundError as e:
        print(f"elo: --league-dir: {e}", file=sys.stderr)
        return 2
    try:
        members, matches = list(league.members()), list(league.matches())
    except (FileNotFoundError, NotADirectoryError, ValueError) as e:
        print(f"elo: cannot read league directory {root}: {e}", file=sys.stderr)
        return 2
    res = league_table(members, matches, k=args.k, initial=args.initial,
                       bootstrap=args.bootstrap, seed=args.seed)
    res["league_dir"] = str(root)
    if args.json:
        print(json.dumps(res))
    else:
        print(format_table(res))
    return 0
