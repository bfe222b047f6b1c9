"""The registry's content-addressed artifact store.

Every artifact (SB3 zip, raw ``.bpw``) is one file named by the sha256 of its
bytes::

    DIR/blobs/<sha256[:2]>/<sha256>      the published artifacts, never rewritten
    DIR/blobs/.tmp/<random>.part         an upload being received
    DIR/blobs/.tmp/<sha256>.<random>.ready   received, verified and fsynced, waiting for
                                         its database transaction to commit

Why content addressing: no name a client chose ever reaches the file system (ids,
file names of the upload, nothing), so there is nothing to traverse with; and
identical bytes — the same checkpoint uploaded by two leagues, a retried upload —
are stored once.

Why the temp directory and the order: an upload is streamed into a temp file in
the store (same file system, so publishing is a hard link, never a copy), hashed
while it arrives, fsynced, and linked into place only *after* the transaction
that records it has committed.  A failed or interrupted upload therefore leaves
neither a record nor a file: its temp file is deleted.  ``os.link`` refuses an
existing name, so a published artifact is never replaced; if the name exists the
bytes are already there (same hash, same content).  A service killed between the
commit and the link leaves a ``.ready`` temp file; :meth:`Store.recover` (run at
every start) links the ones a record refers to and deletes every other temp file.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from brawlkit.common.io import fsync_dir

BLOBS_DIR = "blobs"
TMP_DIR = ".tmp"
_SHA256 = re.compile(r"[0-9a-f]{64}")


def is_sha256(text: object) -> bool:
    """True for 64 lowercase hex digits (the only names the store ever uses)."""
    return isinstance(text, str) and _SHA256.fullmatch(text) is not None


class TempBlob:
    """An artifact being received: a temp file in the store, hashed as it is written.

    ``write`` chunks as they arrive; ``finish`` fsyncs and renames it to its
    ``.ready`` name (the hash is known then); ``discard`` deletes it (idempotent)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.path = store.tmp_dir / f"{secrets.token_hex(12)}.part"
        self._fh: BinaryIO | None = open(self.path, "xb")  # noqa: SIM115 — closed in finish/discard
        self._hash = hashlib.sha256()
        self.size = 0
        self.sha256 = ""

    def write(self, data: bytes) -> None:
        if self._fh is None:
            raise ValueError("temp blob already finished")
        self._fh.write(data)
        self._hash.update(data)
        self.size += len(data)

    def finish(self) -> str:
        """Flush, fsync, close and mark ready; returns the sha256 of the content."""
        if self._fh is None:
            return self.sha256
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        self._fh = None
        self.sha256 = self._hash.hexdigest()
        ready = self.store.tmp_dir / f"{self.sha256}.{secrets.token_hex(6)}.ready"
        os.rename(self.path, ready)
        self.path = ready
        return self.sha256

    def discard(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self.path.unlink(missing_ok=True)


class Store:
    """The artifacts under ``DIR/blobs``.  Cheap to construct; holds no open files."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = Path(data_dir) / BLOBS_DIR
        self.tmp_dir = self.root / TMP_DIR
        self.tmp_dir.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        """Where the artifact of ``sha256`` lives (``ValueError`` for anything that is
        not a sha256: the only names that ever reach the file system)."""
        if not is_sha256(sha256):
            raise ValueError(f"not a sha256: {sha256!r}")
        return self.root / sha256[:2] / sha256

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def temp(self) -> TempBlob:
        """A new temp file to receive an upload into."""
        return TempBlob(self)

    def publish(self, blob: TempBlob) -> bool:
        """Link a finished temp file into place under its sha256 and delete the temp.

        True if this call created the artifact, False if identical bytes were there
        already (content addressing: same name, same content).  Call only after the
        record that refers to it is committed."""
        sha = blob.finish()
        final = self.path(sha)
        final.parent.mkdir(exist_ok=True)
        try:
            os.link(blob.path, final)
            created = True
        except FileExistsError:
            created = False
        blob.discard()
        if created:
            fsync_dir(final.parent)
        return created

    def open(self, sha256: str) -> BinaryIO:
        return open(self.path(sha256), "rb")

    def read(self, sha256: str) -> bytes:
        return self.path(sha256).read_bytes()

    def artifacts(self) -> Iterator[str]:
        """The sha256 of every published artifact (temp files excluded)."""
        for sub in sorted(self.root.iterdir()):
            if sub.name == TMP_DIR or not sub.is_dir():
                continue
            for f in sorted(sub.iterdir()):
                if is_sha256(f.name) and f.name[:2] == sub.name:
                    yield f.name

    def temp_files(self) -> list[Path]:
        return sorted(self.tmp_dir.iterdir())

    def recover(self, referenced: Iterable[str]) -> tuple[int, int]:
        """Clean up after a service that was killed: link every ``.ready`` temp file
        whose sha256 a record refers to but whose artifact is missing (killed between
        commit and link), delete every other temp file (uploads that never
        committed).  Only safe while no upload runs: the service calls it at start,
        holding the data directory's lock.  Returns (linked, deleted)."""
        wanted = set(referenced)
        linked = deleted = 0
        for f in self.temp_files():
            sha = f.name.split(".", 1)[0]
            if f.name.endswith(".ready") and sha in wanted and not self.has(sha):
                final = self.path(sha)
                final.parent.mkdir(exist_ok=True)
                digest = hashlib.sha256()
                with open(f, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):  # noqa: B023
                        digest.update(chunk)
                if digest.hexdigest() == sha:
                    try:
                        os.link(f, final)
                        linked += 1
                    except FileExistsError:
                        pass
            f.unlink(missing_ok=True)
            deleted += 1
        if linked or deleted:
            fsync_dir(self.tmp_dir)
        return linked, deleted - linked
