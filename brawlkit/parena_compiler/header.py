"""PARENA's ``header(NAME)``: a ``#define`` of the C header, as C computes with it.

The reading itself is :func:`brawlkit.wire.header.read_defines` (the one header
parser); this module keeps PARENA's view of it: every literal define as a
double, a ``f``-suffixed one as the float32 C sees, cached per file and mtime.
"""

from __future__ import annotations

from pathlib import Path

from brawlkit.common.paths import header_path as default_header
from brawlkit.wire.header import f32, read_defines

__all__ = ["default_header", "f32", "read_header"]

_cache: dict[Path, tuple[float, dict[str, float]]] = {}


def read_header(path: Path) -> dict[str, float]:
    """Every ``#define NAME literal`` of ``path`` as a double (OSError if unreadable)."""
    path = Path(path)
    mtime = path.stat().st_mtime
    hit = _cache.get(path)
    if hit and hit[0] == mtime:
        return hit[1]
    out = {name: float(d.c_value) for name, d in read_defines(path).items()
           if d.c_value is not None}
    _cache[path] = (mtime, out)
    return out
