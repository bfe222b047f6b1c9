"""``python -m brawlkit train``: one flag per :class:`TrainConfig` field, plus where
the run goes (``--run-dir``, ``--runs-root``, ``--resume``) and how it reports."""

from __future__ import annotations

import argparse
import json
import sys

from brawlkit.common.cli_args import add_json_flag, add_progress_flag, command_parser
from brawlkit.export.actor import checkpoint_meta
from brawlkit.registry.client import RegistryError
from brawlkit.training.checkpoints import DEFAULT_RUNS_ROOT
from brawlkit.training.config import (
    RunOptions,
    TrainConfig,
    add_config_arguments,
    config_from_args,
    parse_config_args,
)


def build_parser() -> argparse.ArgumentParser:
    ap = command_parser("train", "Train one league role with SB3 PPO over real UDP packets, against the "
        "built-in CPU curriculum or, with --league-dir, against the league's pool; writes "
        "runs/<role>/<run>/gen_XXXX.zip + .json, progress CSV and TensorBoard logs.",
    )
    add_config_arguments(ap)
    run = ap.add_argument_group("the run")
    run.add_argument("--resume", action="store_true",
                     help="continue the role's run with the newest checkpoint (or --run-dir's)")
    run.add_argument("--resume-or-new", action="store_true",
                     help="resume when there is a run to resume (locally or, with --registry, "
                     "in the registry), otherwise start a new one")
    run.add_argument("--time-budget", type=float, default=None, metavar="MINUTES",
                     help="stop after the generation past which another would overrun this "
                     "many minutes (--generations still caps the run)")
    run.add_argument("--run-dir", default=None,
                     help="run directory (default runs/<role>/<time>-s<seed>)")
    run.add_argument("--runs-root", default=DEFAULT_RUNS_ROOT, help="parent of the role directories")
    run.add_argument("--league-dir", default=None,
                     help="train as a member of this league (docs/league.md): opponents by the "
                     "role's PFSP over the pool, every generation registered there with its "
                     "matches; without it, the CPU curriculum")
    run.add_argument("--registry", default=None, metavar="URL",
                     help="keep --league-dir in step with this checkpoint registry "
                     "(docs/registry.md): push every generation and its matches, pull the "
                     "other locations' members; with --resume and no local run, continue from "
                     "the role's newest registry checkpoint. Credentials: BRAWLKIT_AGENT_ID "
                     "and BRAWLKIT_AGENT_SECRET")
    run.add_argument("--location", default=None,
                     help="this machine's name in the registry (default: the host name)")
    add_progress_flag(run)
    add_json_flag(run)
    return ap


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, TrainConfig, RunOptions]:
    """(the arguments, the config, the run options) of ``train``'s command line, every
    check that needs no file or server done (a mistake: one line, exit 2).  ``league
    run`` checks the flags it passes on to each role here, before any role starts."""
    ap = build_parser()
    args, chosen = parse_config_args(ap, argv)
    try:
        cfg = config_from_args(args)
    except ValueError as e:
        ap.error(str(e))
    if args.resume and args.resume_or_new:
        ap.error("--resume and --resume-or-new exclude each other")
    if args.time_budget is not None and not args.time_budget > 0:
        ap.error(f"--time-budget must be > 0 minutes, got {args.time_budget}")
    opts = RunOptions(run_dir=args.run_dir, runs_root=args.runs_root, resume=args.resume,
                      resume_if_any=args.resume_or_new, progress=not args.no_progress,
                      league_dir=args.league_dir, registry=args.registry,
                      location=args.location, chosen=chosen,
                      time_budget_s=None if args.time_budget is None else 60.0 * args.time_budget)
    try:
        opts.validate()
    except ValueError as e:
        ap.error(str(e))
    return args, cfg, opts


def main(argv: list[str] | None = None) -> int:
    args, cfg, opts = parse(argv)
    if cfg.init_from is not None:  # not a checkpoint at all: said before torch loads
        try:
            checkpoint_meta(cfg.init_from)
        except (FileNotFoundError, ValueError) as e:
            print(f"train: --init-from: {e}", file=sys.stderr)
            return 2
    from brawlkit.training.ppo import train  # here: --help must not load torch

    try:
        res = train(cfg, opts)
    except (FileNotFoundError, FileExistsError, ValueError, RegistryError) as e:
        print(f"train: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(res.to_json()))
    else:
        print(f"run dir {res.run_dir}: {len(res.checkpoints)} generation(s), "
              f"{res.total_timesteps} steps in {res.seconds:.0f}s")
        for ev in res.evals:
            print("  " + " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}"
                                  for k, v in ev.items()))
    return 0
