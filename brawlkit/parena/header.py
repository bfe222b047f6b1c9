"""Read ``#define BP_* literal`` values from brawlpit.h for PARENA's ``header(NAME)``.

Unlike ``brawlkit.constants`` this keeps the C meaning of a float suffix: ``0.1f``
is the float32 nearest to 0.1, widened to double — exactly what ``(double)BP_X``
is in C — so a folded header constant is identical in both backends.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.+?)\s*(?:/\*.*|//.*)?$")
_INT = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?[lL]{0,2}$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?$")

_cache: dict[Path, tuple[float, dict[str, float]]] = {}


def default_header() -> Path:
    env = os.environ.get("BRAWLKIT_HEADER")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "native" / "include" / "brawlpit.h"


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def read_header(path: Path) -> dict[str, float]:
    """Every ``#define NAME literal`` of ``path`` as a double (OSError if unreadable)."""
    path = Path(path)
    mtime = path.stat().st_mtime
    hit = _cache.get(path)
    if hit and hit[0] == mtime:
        return hit[1]
    out: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _DEFINE.match(line)
        if not m:
            continue
        raw = m.group(2).strip()
        if raw.startswith("(") and raw.endswith(")"):
            raw = raw[1:-1].strip()
        if _INT.match(raw):
            out[m.group(1)] = float(int(raw.rstrip("uUlL"), 0))
        elif _FLOAT.match(raw):
            if raw[-1] in "fF":
                out[m.group(1)] = f32(float(raw[:-1]))
            else:
                out[m.group(1)] = float(raw)
    _cache[path] = (mtime, out)
    return out
