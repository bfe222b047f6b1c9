"""``python -m brawlkit botpool``: native bots of every checkpoint playing each other
(and humans) so Elo keeps moving for the whole league.  docs/botpool.md."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from brawlkit.botpool.engine import BotPool
from brawlkit.botpool.options import Options
from brawlkit.common.cli_args import command_parser
from brawlkit.league.directory import LeagueDir
from brawlkit.registry.client import RegistryClient, RegistryError, RegistryUnavailable


def build_parser() -> argparse.ArgumentParser:
    ap = command_parser("botpool", "Run native brawlpit_bot matches between every checkpoint with a .bpw "
        "(all generations and roles) on a local server, record each result (league match log "
        "and/or registry) so Elo keeps moving, and keep bots waiting for humans on a realtime "
        "server. Failed matches are void, never results. docs/botpool.md.")
    src = ap.add_argument_group("where bots come from and results go (at least one)")
    src.add_argument("--league-dir", type=Path, help="league directory: members' .bpw, match log")
    src.add_argument("--registry", help="registry URL (credentials: BRAWLKIT_AGENT_ID / "
                     "BRAWLKIT_AGENT_SECRET; write scope to post results)")
    ap.add_argument("--pairs", type=int, default=2, help="concurrent bot-vs-bot matches (default 2)")
    ap.add_argument("--human-bots", type=int, default=0,
                    help="bots kept waiting for humans on the realtime server (default 0)")
    ap.add_argument("--human-port", type=int, default=0,
                    help="UDP port of the human-facing server (default 0: the kernel's choice, "
                    "printed as 'human server listening PORT')")
    ap.add_argument("--human-host", default="127.0.0.1",
                    help="address the human-facing server binds (default 127.0.0.1)")
    ap.add_argument("--mode", choices=("fastforward", "realtime"), default="fastforward",
                    help="pace of bot-vs-bot matches (default fastforward)")
    ap.add_argument("--speed", type=float, default=1.0,
                    help="fastforward pace in multiples of 60 Hz, 0 = unpaced (default 1)")
    ap.add_argument("--matches", type=int, default=0,
                    help="stop after K completed (non-void) matches; 0 = run until stopped")
    ap.add_argument("--refresh", type=float, default=60.0,
                    help="seconds between re-reads of the bot set and ratings (default 60)")
    ap.add_argument("--replays", type=Path,
                    help="keep .bpr replays of the biggest upsets here (index.json lists them)")
    ap.add_argument("--keep-upsets", type=int, default=20,
                    help="how many upset replays --replays keeps (default 20)")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed of the pairing and match seeds (default: random)")
    ap.add_argument("--hang-timeout", type=float, default=0.0,
                    help="seconds after both bots joined before a match without a result is "
                    "void (default 0: derived from the match length and pace)")
    ap.add_argument("--seat-bots", choices=("active", "every"), default="active",
                    help="who the human seats play: 'active' = the registry's active "
                    "checkpoint when one is set (registry activate ID; followed without a "
                    "restart), else every bot; 'every' = every bot, fewest human games first "
                    "(default active)")
    ap.add_argument("--active-refresh", type=float, default=5.0,
                    help="seconds between looks at the registry's active checkpoint "
                    "(default 5)")
    ap.add_argument("--no-live", action="store_true",
                    help="one line per event instead of the live table (logs, tests)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.league_dir is None and args.registry is None:
        ap.error("give --league-dir DIR and/or --registry URL")
    for name in ("pairs", "human_bots", "matches", "keep_upsets"):
        if getattr(args, name) < 0:
            ap.error(f"--{name.replace('_', '-')} must be >= 0")
    if args.pairs == 0 and args.human_bots == 0:
        ap.error("nothing to run: --pairs and --human-bots are both 0")
    if not (math.isfinite(args.speed) and 0 <= args.speed <= 1e6):
        ap.error("--speed must be in [0, 1e6]")
    if not (math.isfinite(args.refresh) and args.refresh > 0):
        ap.error("--refresh must be > 0")
    if not (0 <= args.human_port <= 65535):
        ap.error("--human-port must be 0..65535")
    if not (math.isfinite(args.active_refresh) and args.active_refresh > 0):
        ap.error("--active-refresh must be > 0")
    if not (math.isfinite(args.hang_timeout) and args.hang_timeout >= 0):
        ap.error("--hang-timeout must be >= 0")


    league = None
    if args.league_dir is not None:
        try:
            league = LeagueDir(args.league_dir, create=False)
        except FileNotFoundError as e:
            print(f"botpool: {e}", file=sys.stderr)
            return 2
    client = None
    if args.registry:

        try:
            client = RegistryClient(args.registry, retries=2)
            client.checkpoints(role="main")  # fail fast on bad credentials or a wrong URL
        except RegistryUnavailable as e:  # down now: the pool retries (results are queued)
            print(f"botpool: registry {args.registry} unreachable now, retrying: {e}",
                  file=sys.stderr)
        except RegistryError as e:
            print(f"botpool: registry {args.registry}: {e}", file=sys.stderr)
            return 2
    opts = Options(league_dir=args.league_dir, registry=args.registry, pairs=args.pairs,
                   human_bots=args.human_bots, human_port=args.human_port,
                   human_host=args.human_host, mode=args.mode, speed=args.speed,
                   matches=args.matches, refresh=args.refresh, replays=args.replays,
                   keep_upsets=args.keep_upsets, seed=args.seed, live=not args.no_live,
                   hang_timeout=args.hang_timeout, seat_bots=args.seat_bots,
                   active_refresh=args.active_refresh)
    return BotPool(opts, league, client).run()
