"""``python -m brawlkit``: one entry point; notebooks call the same functions.

Each sub-command lives in its own module exposing ``main(argv) -> int``; this
file only routes, importing the module on demand so ``--help`` and light
commands never pay for torch (``--help`` imports each command's module, which is
torch-free at import, to list its sub-commands from its own parser).  A mistyped
command is one line naming the closest one.  ``--json`` commands print one JSON object on
the last line of stdout.  docs/cli.md documents every command.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys

from brawlkit.common.cli_args import subcommand_names

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
    "registry": ("brawlkit.registry.cli", "the checkpoint registry (docs/registry.md)"),
    "botpool": ("brawlkit.botpool.cli", "native bots of every checkpoint playing each other and humans; Elo keeps moving"),
    "replay": ("brawlkit.replay.cli", "verify a .bpr match replay bit for bit and render it to GIF/MP4"),
    "play": ("brawlkit.play.app", "play BRAWLPIT (or watch an arena) in a window: keyboard or gamepad"),
    "policy": ("brawlkit.policy_server.cli", "the /move endpoint: serve a checkpoint as named moves; play any endpoint vs the CPU"),
}
#: benchmark -> (module, one-line help); ``bench NAME`` runs ``module.main``
BENCHES: dict[str, tuple[str, str]] = {
    "env": ("brawlkit.bench.env", "env steps/s over UDP vs in-process (lockstep, fast-forward, arenas)"),
    "learn": ("brawlkit.bench.learn", "what a training recipe learns: fresh-match win rates per budget"),
    "native": ("brawlkit.bench.native", "the C policy forward vs numpy and torch (ns per call, parity)"),
    "train": ("brawlkit.bench.train", "the real training loop's env steps/s beside its ceilings "
              "(the lane alone, the zero-cost env, a busy machine)"),
    "exploit": ("brawlkit.bench.exploit", "how easily a policy is beaten: fresh exploiters trained "
                "against it alone, the best one's win rate"),
    "registry": ("brawlkit.bench.registry_load", "a real registry serve under a league's load "
                 "(docs/registry.md)"),
}
BENCH_HELP = ("benchmarks, reported as ratios against a reference measured in the same run "
              "(--json for one JSON line)")

USAGE = """usage: python -m brawlkit COMMAND [ARGS...]

commands:
{commands}

`python -m brawlkit COMMAND --help` shows a command's options."""

#: the column where a command's help starts
_HELP_COL = 27


def subcommands(command: str) -> list[str]:
    """The sub-commands of ``command`` (empty: it has none), read from its own parser:
    a command module with sub-commands exposes ``build_parser()`` (``bench``'s are
    :data:`BENCHES`)."""
    if command == "bench":
        return list(BENCHES)
    build = getattr(importlib.import_module(COMMANDS[command][0]), "build_parser", None)
    return subcommand_names(build()) if build is not None else []


def _usage() -> str:
    lines = []
    for c, help_ in [*((c, h) for c, (_, h) in COMMANDS.items()), ("bench", BENCH_HELP)]:
        lines.append(f"  {c:<{_HELP_COL - 2}}{help_}")
        subs = subcommands(c)
        if subs:
            lines.append(f"{'':<{_HELP_COL}}sub-commands: {', '.join(subs)}")
    return USAGE.format(commands="\n".join(lines))


def _bench_usage() -> str:
    width = max(len(b) for b in BENCHES)
    return ("usage: python -m brawlkit bench {" + "|".join(BENCHES) + "} [ARGS...]\n\n"
            + BENCH_HELP + ":\n"
            + "\n".join(f"  {b:<{width + 2}}{h}" for b, (_, h) in BENCHES.items())
            + "\n\n`python -m brawlkit bench NAME --help` shows a benchmark's options.")


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


def _unknown(what: str, name: str, known: list[str], help_cmd: str) -> int:
    """One line for a mistyped command: what is known, the closest name, where help is."""
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    print(f"brawlkit: unknown {what} {name!r}; {hint}the {what}s are {'|'.join(known)} "
          f"(`{help_cmd}` describes them)", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "bench":
        if not rest or rest[0] in ("-h", "--help", "help"):
            print(_bench_usage())
            return 0 if rest else 2
        if rest[0] not in BENCHES:
            return _unknown("benchmark", rest[0], list(BENCHES), "python -m brawlkit bench --help")
        return _run(BENCHES[rest[0]][0], rest[1:])
    if cmd not in COMMANDS:
        return _unknown("command", cmd, [*COMMANDS, "bench"], "python -m brawlkit --help")
    return _run(COMMANDS[cmd][0], rest)
