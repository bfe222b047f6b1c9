"""Writes that never leave half a file: temp file in the same directory, then rename."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via ``path.tmp`` + rename (readers see old or new, never half)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return out


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """JSON (indented, sorted keys) written atomically; non-JSON values via ``str``."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    return atomic_write_bytes(path, text.encode("utf-8"))
