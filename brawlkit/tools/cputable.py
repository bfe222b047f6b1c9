"""``python -m brawlkit cputable``: the built-in CPU's level-vs-level table.

The matches run in C (``native/build/brawlpit_cputable``: full in-process
matches, slots alternated between games so slot bias cancels); this command
is the CLI's door to it, passing the options through.  Score = (wins +
draws / 2) / games for the row level against the column level.
"""

from __future__ import annotations

import subprocess

from brawlkit.common.paths import native_path


def main(argv: list[str] | None = None) -> int:
    exe = native_path("brawlpit_cputable")
    return subprocess.run([str(exe), *(argv or [])], check=False).returncode
