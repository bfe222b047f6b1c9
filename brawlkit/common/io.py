"""Writes that never leave half a file: temp file in the same directory, then rename."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Self


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


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make a link, rename or unlink in directory ``path`` durable. Filesystems that
    cannot fsync a directory are tolerated: the file's own data was fsynced already,
    and losing only the directory entry on a crash is what they promise anyway."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Closing:
    """Mixin: ``with obj: ...`` ends in ``obj.close()`` (the class defines ``close``), so
    every resource-holding class (servers, envs, recorders, writers) is a context manager
    the same way."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
