"""The streaming parser of ``POST /checkpoints``' multipart body.

Why the upload is hand-parsed: the body goes straight into temp files of the store,
hashed while the bytes arrive, and the size limit stops it *while streaming* (a 413
before the rest is read; a framework form parser would first spool the whole body
elsewhere).  What arrived is checked, committed and published by the route
(:mod:`brawlkit.registry.routes.checkpoints`); this module only takes the body apart.
"""

from __future__ import annotations

from python_multipart.multipart import MultipartParser, parse_options_header

from brawlkit.registry.deps import http_error
from brawlkit.registry.store import Store, TempBlob

#: the ``metadata`` part of an upload is JSON, not an artifact: 1 MiB is plenty
METADATA_MAX_BYTES = 1 << 20


class MultipartUpload:
    """Receives ``POST /checkpoints``' multipart body chunk by chunk: the ``metadata``
    part into memory (at most :data:`METADATA_MAX_BYTES`), the ``checkpoint`` and
    ``blob`` parts into temp files of the store.  The parts' file names are never
    looked at."""

    FILES = ("checkpoint", "blob")

    def __init__(self, store: Store, boundary: bytes) -> None:
        self.store = store
        self.files: dict[str, TempBlob] = {}
        self.metadata: bytearray | None = None
        self.done = False
        self._target: TempBlob | bytearray | None = None
        self._headers: dict[str, bytes] = {}
        self._field = bytearray()
        self._value = bytearray()
        self.parser = MultipartParser(boundary, callbacks={
            "on_part_begin": self._part_begin,
            "on_header_field": lambda d, s, e: self._field.extend(d[s:e]),
            "on_header_value": lambda d, s, e: self._value.extend(d[s:e]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
            "on_end": self._end,
        }, max_header_count=16, max_header_size=8192)

    def feed(self, chunk: bytes) -> None:
        try:
            self.parser.write(chunk)
        except ValueError as e:  # python_multipart's parse errors are ValueErrors
            raise http_error(400, f"malformed multipart body: {e}") from None

    def _part_begin(self) -> None:
        self._headers = {}
        self._target = None

    def _header_end(self) -> None:
        self._headers[bytes(self._field).decode("latin-1").strip().lower()] = bytes(self._value)
        self._field.clear()
        self._value.clear()

    def _headers_finished(self) -> None:
        kind, opts = parse_options_header(self._headers.get("content-disposition", b""))
        raw_name = opts.get(b"name")
        if kind != b"form-data" or raw_name is None:
            raise http_error(400, "every multipart part needs 'Content-Disposition: form-data; "
                                  "name=...'")
        name = raw_name.decode("latin-1")
        if name == "metadata":
            if self.metadata is not None:
                raise http_error(400, "the 'metadata' part is given twice")
            self.metadata = bytearray()
            self._target = self.metadata
        elif name in self.FILES:
            if name in self.files:
                raise http_error(400, f"the {name!r} part is given twice")
            self.files[name] = self._target = self.store.temp()
        else:
            raise http_error(400, f"unexpected multipart part {name[:60]!r} (the parts are "
                                  "'metadata', 'checkpoint' and optionally 'blob')")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if isinstance(self._target, bytearray):
            if len(self._target) + (end - start) > METADATA_MAX_BYTES:
                raise http_error(413, f"the metadata part is larger than {METADATA_MAX_BYTES} "
                                      "bytes")
            self._target.extend(data[start:end])
        elif self._target is not None:
            self._target.write(data[start:end])

    def _part_end(self) -> None:
        self._target = None

    def _end(self) -> None:
        self.done = True

    def finish_files(self) -> None:
        """Flush and fsync the file parts (blocking: run it in a worker thread)."""
        for tmp in self.files.values():
            tmp.finish()

    def publish_files(self) -> None:
        """Link the finished file parts into place; only after the record is committed."""
        for tmp in self.files.values():
            self.store.publish(tmp)

    def discard(self) -> None:
        """Delete the temp files of an upload that will not be committed."""
        for blob in self.files.values():
            blob.discard()


def boundary_of(content_type: str) -> bytes:
    """The multipart boundary of a ``Content-Type`` header; 415 unless it is
    ``multipart/form-data`` with a boundary of at most 200 bytes."""
    ctype, opts = parse_options_header(content_type)
    boundary = opts.get(b"boundary")
    if ctype != b"multipart/form-data" or not boundary or len(boundary) > 200:
        raise http_error(415, "the upload is multipart/form-data with a boundary")
    return boundary
