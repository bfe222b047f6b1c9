"""What every ``python -m brawlkit COMMAND`` parser shares, declared once.

Each command's module builds its own :mod:`argparse` parser (the router in
``brawlkit/cli.py`` imports it on demand); the parts they all have — the program name a
user types, the ``--json`` contract (docs/cli.md: one JSON object on the last line of
stdout) and the progress switch — come from here, so a help text is written once and a
command cannot drift from the others.  Standard library only.
"""

from __future__ import annotations

import argparse
from typing import Any

#: the ``--json`` contract of every command that has the flag
JSON_HELP = "print one JSON object on the last line of stdout"


def command_parser(command: str, description: str | None, **kw: Any) -> argparse.ArgumentParser:
    """The parser of ``python -m brawlkit <command>``."""
    return argparse.ArgumentParser(prog=f"python -m brawlkit {command}",
                                   description=description, **kw)


def add_json_flag(ap: argparse.ArgumentParser | Any, what: str = "") -> None:
    """``--json``: ``what`` is printed as one JSON object on the last stdout line."""
    ap.add_argument("--json", action="store_true",
                    help=f"{JSON_HELP}{': ' + what if what else ''}")


def add_progress_flag(ap: argparse.ArgumentParser | Any) -> None:
    """``--no-progress``: no progress bars (logs, CI, tests)."""
    ap.add_argument("--no-progress", action="store_true",
                    help="no progress bars (logs, CI); one line per finished unit instead")
