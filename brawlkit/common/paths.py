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


def data_root() -> Path:
    """Where a notebook's relative default paths (``runs/league``, ``runs``, ...) live:
    ``BRAWLKIT_DATA_DIR`` if set, else the checkout root.

    Why not the working directory: the same notebook runs under papermill from the
    repository root, in a JupyterLab kernel started by ``make lab`` (cwd ``notebooks/``)
    and on Colab (cwd ``/content``); resolving from the package makes ``runs/league``
    the same directory in all three, the one ``make train`` writes.
    """
    env = os.environ.get("BRAWLKIT_DATA_DIR")
    return Path(env).expanduser().resolve() if env else repo_root()


def resolve(path: str | os.PathLike[str] | None) -> Path | None:
    """``path`` as an absolute path: relative ones under :func:`data_root` (``~``
    expanded); ``None`` and ``""`` stay ``None`` (a notebook's "use the default")."""
    if path is None or str(path) == "":
        return None
    p = Path(path).expanduser()
    return p if p.is_absolute() else data_root() / p


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
