"""Constants read from ``native/include/brawlpit.h`` — never retyped here.

Why parse the header instead of copying numbers: the C server, the C bot and
the Python env must agree on every physics and normalisation constant; a
second hand-typed copy is exactly how the observation silently drifts.  The
header keeps each ``#define BP_*`` a plain numeric literal on one line, which is
all this parser accepts; anything else named ``BP_*`` is an error at import.

Usage::

    from brawlkit.constants import C
    C.BP_MATCH_TICKS        # 9000 (int)
    C.BP_BLAST_X            # 224.0 (float, from "224.0f")
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

_DEFINE = re.compile(r"^\s*#\s*define\s+(BP_[A-Z0-9_]+)\s+(.+?)\s*(?:/\*.*)?$")
_INT = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?$")


def repo_root() -> Path:
    """The checkout root (the directory holding ``native/`` and ``brawlkit/``)."""
    return Path(__file__).resolve().parent.parent


def header_path() -> Path:
    """Path of the protocol header; ``BRAWLKIT_HEADER`` overrides it."""
    env = os.environ.get("BRAWLKIT_HEADER")
    if env:
        return Path(env)
    return repo_root() / "native" / "include" / "brawlpit.h"


def parse_header(path: Path) -> dict[str, int | float]:
    """Return every ``#define BP_NAME literal`` of ``path`` as a dict.

    Raises ``ValueError`` naming the line when a ``BP_*`` define is not a plain
    literal, so a header edit that this parser cannot read fails loudly.
    """
    values: dict[str, int | float] = {}
    text = path.read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _DEFINE.match(line)
        if not m:
            continue
        name, raw = m.group(1), m.group(2).strip()
        if raw.startswith("(") and raw.endswith(")"):
            raw = raw[1:-1].strip()
        if _INT.match(raw):
            values[name] = int(raw.rstrip("uU"), 0)
        elif _FLOAT.match(raw):
            values[name] = float(raw.rstrip("fF"))
        else:
            raise ValueError(
                f"{path}:{lineno}: #define {name} is not a plain numeric literal "
                f"({raw!r}); brawlkit.constants only reads literals, keep it one"
            )
    return values


def _load() -> SimpleNamespace:
    path = header_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"protocol header not found at {path}; brawlkit reads its constants "
            "from native/include/brawlpit.h in the checkout (or set BRAWLKIT_HEADER)"
        )
    return SimpleNamespace(**parse_header(path))


C = _load()
