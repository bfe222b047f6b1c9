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

import operator
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


def check_action_repeat(value: int, what: str = "action_repeat") -> int:
    """``value`` as an int if it is a repeat the wire carries (a CMD covers 1..BP_MAX_REPEAT
    ticks; the server drops any other), else ``ValueError`` naming ``what``: the one range
    check of the TrainConfig, the envs and the ``.bpw`` header."""
    n = _integer(value)
    if n is None or not 1 <= n <= int(C.BP_MAX_REPEAT):
        raise ValueError(f"{what} {value!r} outside 1..{int(C.BP_MAX_REPEAT)}: it must be an "
                         f"integer number of ticks the wire carries (BP_MAX_REPEAT)")
    return n


def check_input_delay(value: int, what: str = "input_delay") -> int:
    """``value`` if it is an input delay lockstep can honour (a command may lead the
    server's tick by at most BP_MAX_CMD_LEAD, half of it kept for the repeat), else
    ``ValueError`` naming ``what``."""
    limit = int(C.BP_MAX_CMD_LEAD) // 2
    n = _integer(value)
    if n is None or not 0 <= n <= limit:
        raise ValueError(f"{what} {value!r} outside 0..{limit}: it must be an integer number "
                         f"of ticks (half of BP_MAX_CMD_LEAD)")
    return n


def _integer(value: object) -> int | None:
    """``value`` as an int when it is one (numpy integers too; not bools), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None
