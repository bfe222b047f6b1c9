"""``python -m brawlkit elo --league-dir DIR [--json]``: the league's ratings table.

Reads the league directory through :class:`brawlkit.league.pool.LeagueDir`
(its members and its match log, in the pool's deterministic replay order) and
recomputes every rating from the log (:mod:`brawlkit.league.ratings`): the
live Elo replayed match by match and the order-independent Bradley–Terry
strength with its bootstrap interval.  Nothing is stored, so the ratings
survive any restart and two machines reading the same directory agree.
docs/ratings.md documents the formulas and the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from brawlkit.league.ratings import bradley_terry, elo
from brawlkit.league.records import id_kind


def _finite(x: float) -> float | None:
    """JSON has no NaN: an undefined value (no bootstrap) is null."""
    return x if math.isfinite(x) else None


def league_table(
    members: list[Any], matches: list[Any], k: float = 32.0, initial: float = 1200.0,
    bootstrap: int = 200, seed: int = 0,
) -> dict[str, Any]:
    """The ``--json`` object of ``members`` (:class:`~brawlkit.league.records.Member`)
    and ``matches`` (replay order): one row per id, by Elo rating, highest first.

    An id that appears in the log but not among the members (a registered human
    player ``player:NAME``, or a member whose record is gone or corrupt) is still
    rated, with role ``"?"``.  ``kind`` says what each id is (``bot``,
    ``baseline``, ``cpu``, ``human``); ``anonymous`` is never a row (its matches
    move only the other side's Elo and stay out of Bradley–Terry).
    """
    ids = [m.id for m in members]
    info = {m.id: m for m in members}
    er = elo(matches, ids, k=k, initial=initial)
    bt = bradley_terry(matches, ids, bootstrap=bootstrap, seed=seed, initial=initial)
    rows = []
    for mid in er.ranking():
        mem = info.get(mid)
        b = bt.ratings[mid]
        wr = er.win_rate(mid)
        rows.append({
            "id": mid,
            "role": mem.role if mem is not None else "?",
            "kind": id_kind(mid, mem.role if mem is not None else None),
            "generation": mem.generation if mem is not None else None,
            "rating": round(er.ratings[mid], 3),
            "games": er.games[mid],
            "wins": er.wins[mid],
            "draws": er.draws[mid],
            "losses": er.losses[mid],
            "win_rate": None if wr is None else round(wr, 4),
            "bt_rating": round(b.rating, 3),
            "bt_lo": _finite(round(b.lo, 3)),
            "bt_hi": _finite(round(b.hi, 3)),
        })
    return {"members": rows, "matches": len(matches), "k": k, "initial": initial,
            "bootstrap": bootstrap, "seed": seed, "bt_prior_games": bt.prior_games}


def format_table(res: dict[str, Any]) -> str:
    """The human table: member, kind, role, generation, Elo, games, win rate, BT [lo, hi]."""
    head = ("member", "kind", "role", "gen", "elo", "games", "win", "bt rating [lo, hi]")
    lines = []
    for r in res["members"]:
        bt = f"{r['bt_rating']:.0f}"
        if r["bt_lo"] is not None:
            bt += f" [{r['bt_lo']:.0f}, {r['bt_hi']:.0f}]"
        lines.append((r["id"], r.get("kind", "-"), r["role"], "-" if r["generation"] is None else str(r["generation"]),
                      f"{r['rating']:.1f}", str(r["games"]),
                      "-" if r["win_rate"] is None else f"{r['win_rate']:.2f}", bt))
    widths = [max(len(h), *(len(row[c]) for row in lines)) for c, h in enumerate(head)]
    right = {4, 5, 6}

    def fmt(row: tuple[str, ...]) -> str:
        return "  ".join(v.rjust(w) if c in right else v.ljust(w)
                         for c, (v, w) in enumerate(zip(row, widths, strict=True))).rstrip()

    out = [f"{res['matches']} matches, Elo K {res['k']:g}, initial {res['initial']:g}; "
           f"Bradley-Terry with {res['bootstrap']} bootstrap resamples (95 % interval)",
           fmt(head), fmt(tuple("-" * w for w in widths))]
    out += [fmt(row) for row in lines]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m brawlkit elo",
        description="The league's ratings, recomputed from the league directory's match log "
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
    ap.add_argument("--json", action="store_true", help="print one JSON object on the last stdout line")
    args = ap.parse_args(argv)
    if not (math.isfinite(args.k) and args.k >= 0):
        ap.error(f"--k must be a finite number >= 0, got {args.k}")
    if not math.isfinite(args.initial):
        ap.error(f"--initial must be finite, got {args.initial}")
    if args.bootstrap < 0:
        ap.error(f"--bootstrap must be >= 0, got {args.bootstrap}")
    root = Path(args.league_dir)
    if not root.is_dir():
        print(f"elo: league directory {root} not found", file=sys.stderr)
        return 2
    from brawlkit.league.pool import LeagueDir  # here: --help must not need the pool

    try:
        league = LeagueDir(root, create=False)
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
