"""Progress of long work, shown where someone can see it.

A terminal gets a tqdm bar, a notebook kernel tqdm's widget, and anything else — a pipe,
a log file, CI, a papermill run's captured stderr — plain lines (``desc: 40/900 match
(4%) 12.3 s``) at most every ``every_s`` seconds and at the end, never carriage
returns.  One place decides, so every long command (``eval``, ``league report``,
``bench learn``) behaves the same.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from brawlkit.common.kernel import in_kernel


class LineProgress:
    """tqdm's ``update`` / ``set_postfix_str`` / ``close`` as plain lines."""

    def __init__(self, total: int | None, desc: str, unit: str, stream: TextIO,
                 every_s: float = 5.0) -> None:
        self.total, self.desc, self.unit, self.stream, self.every_s = total, desc, unit, stream, every_s
        self.n = 0
        self.postfix = ""
        self.t0 = self._last = time.monotonic()
        self._closed = False

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self.every_s:
            self._last = now
            self._print()

    def set_postfix_str(self, s: str) -> None:
        self.postfix = s

    def set_postfix(self, values: dict[str, Any] | None = None, **kw: Any) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in {**(values or {}), **kw}.items())

    def write(self, line: str, file: TextIO | None = None) -> None:
        """A message between progress lines (tqdm's ``write``)."""
        print(line, file=file or self.stream, flush=True)

    def _print(self) -> None:
        of = f"/{self.total}" if self.total else ""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        post = f" {self.postfix}" if self.postfix else ""
        print(f"{self.desc}: {self.n}{of} {self.unit}{pct} {time.monotonic() - self.t0:.1f} s{post}",
              file=self.stream, flush=True)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._print()

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: int | None, desc: str, unit: str = "it", stream: TextIO | None = None,
                 **tqdm_kwargs: Any) -> Any:
    """A tqdm bar on a terminal or in a notebook kernel, :class:`LineProgress` elsewhere."""
    stream = stream or sys.stderr
    if in_kernel():
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, file=stream, **tqdm_kwargs)
    if hasattr(stream, "isatty") and stream.isatty():
        from tqdm import tqdm as text_tqdm

        return text_tqdm(total=total, desc=desc, unit=unit, file=stream, **tqdm_kwargs)
    return LineProgress(total, desc, unit, stream)
