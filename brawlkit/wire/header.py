"""The one reader of ``#define NAME literal`` lines in a C header.

Two consumers, one parser: :mod:`brawlkit.wire.constants` (the ``BP_*`` values
Python uses, so no constant is typed twice) and the PARENA compiler's
``header(NAME)`` (which must fold a constant to exactly what C sees).  That is
why each value records whether it carried C's float suffix: ``0.1f`` in C is the
float32 nearest to 0.1, and :attr:`Define.c_value` is that float32 widened to a
double — what ``(double)BP_X`` is in C.

Standard library only: the native build runs the PARENA compiler with any
Python, before a virtualenv exists.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path

_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Za-z_][A-Za-z0-9_]*)\s+(.+?)\s*(?:/\*.*|//.*)?$")
_INT = re.compile(r"^-?(?:0[xX][0-9a-fA-F]+|\d+)[uU]?[lL]{0,2}$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?$")


def f32(x: float) -> float:
    """``x`` rounded to the nearest float32, widened back to a double."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


@dataclass(frozen=True)
class Define:
    """One ``#define NAME value`` line; ``value`` is None when it is not a plain literal."""

    name: str
    text: str
    line: int
    value: int | float | None
    float32: bool = False

    @property
    def c_value(self) -> int | float | None:
        """The value as C computes with it (a ``f``-suffixed literal is a float32)."""
        if isinstance(self.value, float) and self.float32:
            return f32(self.value)
        return self.value


def _literal(raw: str) -> tuple[int | float | None, bool]:
    if raw.startswith("(") and raw.endswith(")"):
        raw = raw[1:-1].strip()
    if _INT.match(raw):
        return int(raw.rstrip("uUlL"), 0), False
    if _FLOAT.match(raw):
        if raw[-1] in "fF":
            return float(raw[:-1]), True
        return float(raw), False
    return None, False


def read_defines(path: str | Path) -> dict[str, Define]:
    """Every ``#define`` of ``path``, by name (OSError if unreadable)."""
    out: dict[str, Define] = {}
    text = Path(path).read_text(encoding="utf-8")
    for lineno, line in enumerate(text.splitlines(), start=1):
        m = _DEFINE.match(line)
        if m:
            raw = m.group(2).strip()
            value, is_f32 = _literal(raw)
            out[m.group(1)] = Define(m.group(1), raw, lineno, value, is_f32)
    return out
