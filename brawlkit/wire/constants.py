"""Constants read from ``native/include/brawlpit.h`` — never retyped here.

Why parse the header instead of copying numbers: the C server, the C bot and
the Python env must agree on every physics and normalisation constant; a
second hand-typed copy is exactly how the observation silently drifts.  The
header keeps each ``#define BP_*`` a plain numeric literal on one line; any
``BP_*`` define that is not one is an error at import.

Usage::

    from brawlkit.wire.constants import C
    C.BP_MATCH_TICKS        # 9000 (int)
    C.BP_BLAST_X            # 224.0 (float, from "224.0f")
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from brawlkit.common.paths import header_path
from brawlkit.wire.header import read_defines


def header_constants(path: Path) -> dict[str, int | float]:
    """Every ``BP_*`` define of ``path`` as its C value.

    Raises ``ValueError`` naming the line when a ``BP_*`` define is not a plain
    literal, so a header edit that this reader cannot follow fails loudly.
    """
    values: dict[str, int | float] = {}
    for name, d in read_defines(path).items():
        if not name.startswith("BP_"):
            continue
        if d.c_value is None:
            raise ValueError(
                f"{path}:{d.line}: #define {name} is not a plain numeric literal "
                f"({d.text!r}); brawlkit reads only literals from the header, keep it one"
            )
        values[name] = d.c_value
    return values


def _load() -> SimpleNamespace:
    path = header_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"protocol header not found at {path}; brawlkit reads its constants "
            "from native/include/brawlpit.h in the checkout (or set BRAWLKIT_HEADER)"
        )
    return SimpleNamespace(**header_constants(path))


C = _load()

#: the server's modes by the name the CLI, the env and the launcher use (the one table
#: of names -> the header's ``BP_MODE_*`` ids; docs/protocol.md "Modes")
MODE_IDS: dict[str, int] = {"lockstep": int(C.BP_MODE_LOCKSTEP),
                            "fastforward": int(C.BP_MODE_FASTFORWARD),
                            "realtime": int(C.BP_MODE_REALTIME)}
#: the mode names, lockstep (training's) first
MODES: tuple[str, ...] = tuple(MODE_IDS)
