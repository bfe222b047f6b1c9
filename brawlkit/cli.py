"""``python -m brawlkit``: one entry point; notebooks call the same functions.

Each sub-command lives in its own module exposing ``main(argv) -> int``; this
file only routes, importing the module on demand so ``--help`` and light
commands never pay for torch.  ``--json`` commands print one JSON object on
the last line of stdout.  docs/cli.md documents every command.
"""

from __future__ import annotations

import importlib
import os
import sys

# command -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("brawlkit.training.cli", "train one league role with PPO over real packets"),
    "imitate": ("brawlkit.training.imitation", "behaviour-clone the PPO actor from CPU matches and replays: a gen_0000 checkpoint"),
    "eval": ("brawlkit.training.evaluate", "play a checkpoint against an opponent, print win/draw/loss"),
    "export": ("brawlkit.export.cli", "export a PPO checkpoint's actor to a .bpw blob"),
    "league": ("brawlkit.training.league_run", "run the league: every role training concurrently on one directory"),
    "parity": ("brawlkit.tools.parity", "C vs Python observation parity over N states"),
    "parena": ("brawlkit.parena_compiler.cli", "PARENA decision-language compiler (compile FILE --emit c|py)"),
    "cputable": ("brawlkit.tools.cputable", "built-in CPU level-vs-level win-rate table"),
    "elo": ("brawlkit.report.elo_cli", "league ratings: Elo (live, replayed from the match log) and Bradley-Terry"),
    "registry": ("brawlkit.registry.cli", "the checkpoint registry: serve, add-agent"),
    "botpool": ("brawlkit.botpool.cli", "native bots of every checkpoint playing each other and humans; Elo keeps moving"),
    "replay": ("brawlkit.replay.cli", "verify a .bpr match replay bit for bit and render it to GIF/MP4"),
    "play": ("brawlkit.play.app", "play BRAWLPIT (or watch an arena) in a window: keyboard or gamepad"),
    "policy": ("brawlkit.policy_server.cli", "the /move endpoint: serve a checkpoint as named moves; play any endpoint vs the CPU"),
}
BENCHES: dict[str, str] = {
    "env": "brawlkit.bench.env",
    "learn": "brawlkit.bench.learn",
    "native": "brawlkit.bench.native",
    "train": "brawlkit.bench.train",
    "exploit": "brawlkit.bench.exploit",
    "registry": "brawlkit.bench.registry_load",
}

USAGE = """usage: python -m brawlkit COMMAND [ARGS...]

commands:
{commands}
  bench env|native|train|learn  benchmarks, reported as ratios against a reference
                           measured in the same run (--json for one JSON line)
  bench exploit CHECKPOINT  how easily a policy is beaten: fresh exploiters trained
                           against it alone, the best one's win rate (docs/benchmarks.md)
  bench registry           a real registry serve under a league's load (docs/registry.md)

`python -m brawlkit COMMAND --help` shows a command's options."""


def _usage() -> str:
    width = max(len(c) for c in COMMANDS)
    lines = [f"  {c:<{width + 13}}{h}" for c, (_, h) in COMMANDS.items()]
    return USAGE.format(commands="\n".join(lines))


#: the exit status of a command whose reader went away (``elo ... | head``): what a
#: shell reports for a program ended by SIGPIPE (128 + 13)
BROKEN_PIPE_EXIT = 141


def _run(module: str, argv: list[str]) -> int:
    mod = importlib.import_module(module)
    try:
        rc = mod.main(argv)
        sys.stdout.flush()  # here, not at interpreter exit, where it cannot be caught
    except BrokenPipeError:
        return _reader_gone()
    return int(rc or 0)


def _reader_gone() -> int:
    """The reader of stdout closed it (``| head`` read its lines): end quietly, as a
    C tool ended by SIGPIPE does — no traceback, no "Exception ignored" at exit (stdout
    is pointed at /dev/null so Python's final flush has nowhere to fail)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return BROKEN_PIPE_EXIT


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "bench":
        if not rest or rest[0] not in BENCHES:
            print(f"usage: python -m brawlkit bench {{{'|'.join(BENCHES)}}} [--json]",
                  file=sys.stderr)
            return 2
        return _run(BENCHES[rest[0]], rest[1:])
    if cmd not in COMMANDS:
        print(f"brawlkit: unknown command {cmd!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    return _run(COMMANDS[cmd][0], rest)
