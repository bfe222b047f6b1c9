"""Reading the files of a directory that other processes and people write to: regular
files inside it only, each read bounded in size.

Why: a league directory (docs/league.md) is shared by training roles, evaluators,
notebooks and whoever copies files into it, and its readers must never fail — nor
hang, nor leak a file from elsewhere — on what they find there.  A plain
``Path.read_bytes()`` blocks forever on a FIFO named like a match log (its ``open``
waits for a writer), reads ``/dev/zero`` through a symlink or a sparse file of
terabytes until Python raises ``MemoryError``, and follows a symlink to any file on
the machine (``registry push`` then uploads ``/etc/hostname`` as a checkpoint, for
every reader of the registry to download).

The rule, in one place (:func:`read_confined`, as ``openat2``'s ``RESOLVE_BENEATH``
plus ``RESOLVE_NO_SYMLINKS`` would have it, with what Python offers on every Linux):

* the path is given *relative to the directory* (``root``), every part a plain name
  (no ``..``, not absolute);
* every part below ``root`` is opened relative to its parent with ``O_NOFOLLOW``: a
  symbolic link anywhere below ``root`` is refused, wherever it points (the pool
  itself never makes one; ``root`` itself may be a link — where a directory lives is
  its owner's choice);
* the file must be a regular file: FIFOs, sockets and devices are refused unopened (by
  ``lstat``), and the file is opened with ``O_NONBLOCK`` (a FIFO swapped in meanwhile
  does not block the ``open``) and checked again by ``fstat`` on what was opened;
* a file larger than ``limit`` bytes is refused unread, and at most ``limit + 1``
  bytes are ever read (a file that grows while it is read is refused too).

A refusal is :class:`RefusedFile` (an ``OSError``) whose message names the path and
the reason, so callers that skip unreadable files with a warning skip these too.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

#: bytes read per ``read`` call
_CHUNK = 1 << 20
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class RefusedFile(OSError):
    """A file the confined-read rule refuses (or cannot read); ``str()`` names the
    path and the reason, ``reason`` is the reason alone."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


def _kind(mode: int) -> str:
    """What a non-regular file is, for a refusal's message."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def _parts(rel: str | os.PathLike[str]) -> list[str]:
    """The plain names of ``rel``; ``ValueError`` for an absolute path or a ``..``."""
    p = PurePosixPath(os.fspath(rel))
    if p.is_absolute() or not p.parts or any(part in ("..", ".") for part in p.parts):
        raise ValueError(f"{rel}: not a plain path inside the directory")
    return list(p.parts)


def open_confined(root: str | os.PathLike[str], rel: str | os.PathLike[str]) -> int:
    """A read-only descriptor of the regular file ``root/rel`` under the rule of the
    module docstring (the caller closes it); :class:`RefusedFile` otherwise."""
    parts = _parts(rel)
    shown = Path(root) / Path(*parts)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise RefusedFile(shown, f"unreadable ({e.strerror or e})") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                if last:  # a FIFO or a device is never opened at all (opening one can act)
                    mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                        raise RefusedFile(shown, f"{_kind(mode)}, not a regular file")
                nxt = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except RefusedFile:
                raise
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.EMLINK) or (
                        e.errno == errno.ENOTDIR and os.path.islink(Path(root, *parts[:i + 1]))):
                    raise RefusedFile(shown, "a symbolic link (only regular files inside the "
                                             "directory are read, never what a link points at)"
                                      ) from None
                raise RefusedFile(shown, f"unreadable ({e.strerror or e})") from None
            os.close(fd)
            fd = nxt
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RefusedFile(shown, f"{_kind(st.st_mode)}, not a regular file")
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_confined(root: str | os.PathLike[str], rel: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``root/rel``, at most ``limit`` of them, under the
    rule of the module docstring; :class:`RefusedFile` naming the file and the reason
    for a symlink, a FIFO, a device, a file over ``limit`` bytes or one unreadable."""
    fd = open_confined(root, rel)
    shown = Path(root) / rel
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise RefusedFile(shown, f"{size} bytes, over the limit of {limit} bytes")
        chunks: list[bytes] = []
        got = 0
        while True:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
            except OSError as e:
                raise RefusedFile(shown, f"unreadable ({e.strerror or e})") from None
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if got > limit:
                raise RefusedFile(shown, f"grew past the limit of {limit} bytes while read")
        return b"".join(chunks)
    finally:
        os.close(fd)
