"""``python -m brawlkit elo --league-dir DIR [--json] [--ladder] [--check [--fresh N]]``.

Reads the league directory through :class:`brawlkit.league.directory.LeagueDir`
(its members and its match log, in the pool's deterministic replay order) and
recomputes every rating from the log (:mod:`brawlkit.league.ratings`): the
order-independent Bradley–Terry strength with its bootstrap interval (the
headline) and the live Elo replayed match by match, both anchored at cpu:1 = 1000
once the fixed ladder has played.  Nothing is stored, so the ratings survive any
restart and two machines reading the same directory agree.

``--ladder`` records the fixed ladder first when the league lacks it
(:mod:`brawlkit.training.ladder`).  ``--check`` sets each learned member's ratings
against its deterministic evaluations: the win probability the ratings predict
against each CPU level versus the measured score and its 95 % interval, and the pairs
that disagree; with ``--fresh N`` it first plays N new deterministic matches per
(member, level) — compared with ratings that never saw them, then written to the log.
docs/ratings.md documents the formulas, the check and the JSON.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from brawlkit.common.cli_args import add_json_flag, command_parser
from brawlkit.league.directory import LeagueDir
from brawlkit.league.ratings import (
    check_pairs,
    evaluation_counts,
    format_check,
    format_table,
    league_table,
)

#: the match seeds of ``--check --fresh``: a block of their own (training counts up from
#: the run's seed, generation evaluations from 1,000,000, ``league report`` from 50,000,000)
FRESH_SEED = 90_000_000


def _levels(text: str) -> list[int]:
    from brawlkit.wire.cpu_level import CPU_LEVELS

    try:
        out = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        out = []
    if not out or any(lv not in CPU_LEVELS for lv in out):
        raise ValueError(f"--levels {text!r}: a comma list of CPU levels in "
                         f"{CPU_LEVELS[0]}..{CPU_LEVELS[-1]}")
    return out


def fresh_evaluations(league: LeagueDir, sink: Any, members: list[Any], levels: list[int],
                      n: int, n_envs: int = 2) -> list[Any]:
    """``n`` new deterministic matches of every learned member with a checkpoint against
    each level (the policy as it ships, at its trained cadence), as records (source
    ``eval``, made by ``sink``) not yet written.  Seeds: :data:`FRESH_SEED` + 100,000 ×
    level + match."""
    from brawlkit.training.evaluate import load_policies, play_episodes
    from brawlkit.wire.cpu_level import CpuLevel

    recs: list[Any] = []
    for m in members:
        ckpt = league.checkpoint_path(m)
        if m.permanent or ckpt is None or not ckpt.is_file():
            continue
        det, _ = load_policies(ckpt)
        kw = {"action_repeat": det.meta.action_repeat, "input_layout": det.meta.input_layout}
        for lv in levels:
            res = play_episodes(det, CpuLevel(lv).spec, n, FRESH_SEED + 100_000 * lv,
                                n_envs=n_envs, env_kwargs=kw)
            recs += sink.records([{"b": CpuLevel(lv).spec, "result": x["outcome"],
                                   "ticks": x["ticks"], "seed": x["seed"], "time": x["time"]}
                                  for x in res["matches"]], a=m.id)
    return recs


def main(argv: list[str] | None = None) -> int:
    ap = command_parser("elo", "The league's ratings, recomputed from the league directory's match log "
        "on every run (nothing is stored, so they survive any restart): the order-independent "
        "Bradley-Terry strength with a bootstrap 95 % interval (the headline) and the live Elo "
        "replayed match by match, both anchored at cpu:1 = 1000 once the fixed ladder has "
        "played. Only games of two fixed players are rated (a trainer's own episodes are "
        "not). One row per member, by Bradley-Terry, highest first. docs/ratings.md has the "
        "formulas.",
    )
    ap.add_argument("--league-dir", required=True, help="the league directory (members and match log)")
    ap.add_argument("--k", type=float, default=32.0, help="Elo K factor (default 32)")
    ap.add_argument("--initial", type=float, default=1200.0,
                    help="rating of a member before its first game, and the mean of all (default 1200)")
    ap.add_argument("--bootstrap", type=int, default=200,
                    help="Bradley-Terry bootstrap resamples for the interval; 0 = none (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (default 0)")
    ap.add_argument("--ladder", action="store_true",
                    help="first record the fixed ladder (CPU levels and baseline against each "
                    "other) if this league lacks it as the ladder plays now")
    ap.add_argument("--ladder-baseline-games", type=int, default=None,
                    help="with --ladder: the baseline's games against each level (default: "
                    "the ladder's, 4; 0 = CPU pairs only)")
    ap.add_argument("--check", action="store_true",
                    help="set each learned member's ratings against its deterministic "
                    "evaluations and print the pairs that disagree")
    ap.add_argument("--fresh", type=int, default=0, metavar="N",
                    help="with --check: first play N new deterministic matches per member and "
                    "level, compare them with ratings that never saw them, then log them")
    ap.add_argument("--levels", default="1,2,3,4,5,6,7,8",
                    help="with --fresh: the CPU levels played (default all)")
    ap.add_argument("--min-games", type=int, default=1,
                    help="with --check: pairs with fewer evaluation matches are left out (default 1)")
    add_json_flag(ap)
    args = ap.parse_args(argv)
    if not (math.isfinite(args.k) and args.k >= 0):
        ap.error(f"--k must be a finite number >= 0, got {args.k}")
    if not math.isfinite(args.initial):
        ap.error(f"--initial must be finite, got {args.initial}")
    if args.bootstrap < 0:
        ap.error(f"--bootstrap must be >= 0, got {args.bootstrap}")
    if args.fresh < 0 or (args.fresh and not args.check):
        ap.error("--fresh N needs --check and N >= 0")
    if args.ladder_baseline_games is not None and args.ladder_baseline_games < 0:
        ap.error("--ladder-baseline-games must be >= 0")
    try:
        levels = _levels(args.levels)
    except ValueError as e:
        ap.error(str(e))
    root = Path(args.league_dir)
    try:
        league = LeagueDir(root, create=False)  # refuses what is not a league
    except FileNotFoundError as e:
        print(f"elo: --league-dir: {e}", file=sys.stderr)
        return 2
    try:
        if args.ladder:
            from brawlkit.training.ladder import BASELINE_GAMES, ensure_ladder

            games = BASELINE_GAMES if args.ladder_baseline_games is None else args.ladder_baseline_games
            ensure_ladder(league, baseline_games=games, say=lambda s: print(s, file=sys.stderr))
        members, matches = list(league.members()), list(league.matches())
    except (FileNotFoundError, NotADirectoryError, ValueError) as e:
        print(f"elo: cannot read league directory {root}: {e}", file=sys.stderr)
        return 2
    res = league_table(members, matches, k=args.k, initial=args.initial,
                       bootstrap=args.bootstrap, seed=args.seed)
    res["league_dir"] = str(root)
    text = [format_table(res)]
    if res["anchor"] is None:
        text.append("note: the fixed ladder has not played in this league (cpu:1 has no rated "
                    "games), so the scale is not anchored: `elo --ladder` records it")
    if args.check:
        learned = {r["id"] for r in res["members"] if r["kind"] == "bot"}
        if args.fresh:
            from brawlkit.league.sink import MatchSink

            with MatchSink(league, "eval") as sink:
                fresh = fresh_evaluations(league, sink, members, levels, args.fresh)
                pairs = check_pairs(res, evaluation_counts(fresh, learned), args.min_games)
                sink.write(fresh)  # real matches: into the log, after the check
        else:
            pairs = check_pairs(res, evaluation_counts(matches, learned), args.min_games)
        res["check"] = {"fresh": args.fresh, "pairs": pairs,
                        "agree": sum(p["agree"] for p in pairs),
                        "disagree": [p for p in pairs if not p["agree"]]}
        text.append(format_check(pairs, bool(args.fresh)))
    if args.json:
        print(json.dumps(res))
    else:
        print("\n\n".join(text))
    return 0
