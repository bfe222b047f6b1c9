"""Where things are: the checkout, its C header, its native build.

One place finds every native product (programs, shared libraries, the C flags),
so a missing build always fails the same way, with the command that fixes it.
Nothing here builds anything: ``make build`` (or ``make -C native``) does, and
the tests use the built tree as it is.

Overrides, for running against another build or header:
``BRAWLKIT_NATIVE_BUILD`` (the build directory) and ``BRAWLKIT_HEADER``.
"""

from __future__ import annotations

import os
import re
import shlex
from functools import cache
from pathlib import Path


def repo_root() -> Path:
    """The checkout root (the directory holding ``native/`` and ``brawlkit/``)."""
    return Path(__file__).resolve().parents[2]


def native_dir() -> Path:
    return repo_root() / "native"


def header_path() -> Path:
    """The protocol header ``native/include/brawlpit.h``; ``BRAWLKIT_HEADER`` overrides it."""
    env = os.environ.get("BRAWLKIT_HEADER")
    return Path(env) if env else native_dir() / "include" / "brawlpit.h"


def native_build_dir() -> Path:
    """``native/build`` (or ``BRAWLKIT_NATIVE_BUILD``)."""
    env = os.environ.get("BRAWLKIT_NATIVE_BUILD")
    return Path(env) if env else native_dir() / "build"


class NativeBuildMissing(FileNotFoundError):
    """A native product is not built; the message names the command that builds it."""


def native_path(name: str, *, executable: bool | None = None) -> Path:
    """Path of a native product under the build dir (``brawlpit_server``,
    ``libbrawlpit.so``, ``asan/brawlpit_policy``, ...), or :class:`NativeBuildMissing`.

    ``executable`` defaults to True for names without a ``.so`` suffix.
    """
    path = native_build_dir() / name
    if executable is None:
        executable = not name.endswith(".so")
    if not path.is_file() or (executable and not os.access(path, os.X_OK)):
        raise NativeBuildMissing(
            f"{path} not found: build the native code first with `make build` "
            f"(or `make -C native`) in {repo_root()}"
        )
    return path


_CFLAGS_LINE = re.compile(r"^BP_CFLAGS\s*:=\s*(.*?)\s*$", re.M)


@cache
def native_cflags() -> tuple[str, ...]:
    """The one C flag set of ``native/Makefile`` (its ``BP_CFLAGS := ...`` line).

    Tests that compile a mutant of a C file use exactly the flags the build
    uses, so a mutant differs from the product only in its edit.
    """
    makefile = native_dir() / "Makefile"
    m = _CFLAGS_LINE.search(makefile.read_text(encoding="utf-8"))
    if m is None:
        raise RuntimeError(f"{makefile} has no `BP_CFLAGS := ...` line")
    return tuple(shlex.split(m.group(1)))
