"""What every ``python -m brawlkit COMMAND`` parser shares, declared once.

Each command's module builds its own :mod:`argparse` parser (the router in
``brawlkit/cli.py`` imports it on demand); the parts they all have — the program name a
user types, the ``--json`` contract (docs/cli.md: one JSON object on the last line of
stdout) and the progress switch — come from here, so a help text is written once and a
command cannot drift from the others.  Standard library only.

A usage mistake is one line on stderr, exit 2 (:class:`CommandParser`): the error and
where the options are listed, never argparse's usage block above it, which buries the
line that names the fix (clig.dev: an error says what went wrong and how to fix it).
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

#: the ``--json`` contract of every command that has the flag
JSON_HELP = "print one JSON object on the last line of stdout"


class CommandParser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose usage errors are one line.

    Its sub-parsers (``add_subparsers``) are of this class too, so ``league run``'s
    mistakes read the same as ``eval``'s.  Commands report their own checks through
    :meth:`error` as well, so every mistake of a command line has one shape.
    """

    def error(self, message: str) -> NoReturn:
        """``PROG: error: MESSAGE (`PROG --help` lists the options)``, exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the "
                     "options)\n")


def command_parser(command: str, description: str | None, **kw: Any) -> CommandParser:
    """The parser of ``python -m brawlkit <command>``."""
    return CommandParser(prog=f"python -m brawlkit {command}", description=description, **kw)


def subcommand_names(ap: argparse.ArgumentParser) -> list[str]:
    """The sub-commands ``ap`` dispatches (``registry``: serve, add-agent, ...), read
    from its sub-parsers: what help texts list, so they cannot be retyped wrong."""
    return [name for action in ap._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices]


def add_json_flag(ap: argparse.ArgumentParser | Any, what: str = "") -> None:
    """``--json``: ``what`` is printed as one JSON object on the last stdout line."""
    ap.add_argument("--json", action="store_true",
                    help=f"{JSON_HELP}{': ' + what if what else ''}")


def add_progress_flag(ap: argparse.ArgumentParser | Any) -> None:
    """``--no-progress``: no progress bars (logs, CI, tests)."""
    ap.add_argument("--no-progress", action="store_true",
                    help="no progress bars (logs, CI); one line per finished unit instead")
