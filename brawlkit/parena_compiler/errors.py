"""PARENA diagnostics: one line, ``FILE:LINE:COL: error: message (expected ...)``."""

from __future__ import annotations


class ParenaError(Exception):
    """A compile error at a source position (1-based line and column)."""

    def __init__(self, file: str, line: int, col: int, message: str, expected: str | None = None):
        self.file = file
        self.line = line
        self.col = col
        self.message = message
        self.expected = expected
        super().__init__(self.format())

    def format(self) -> str:
        text = f"{self.file}:{self.line}:{self.col}: error: {self.message}"
        if self.expected:
            text += f" (expected {self.expected})"
        # a diagnostic is always exactly one line
        return " ".join(text.splitlines())

    def __str__(self) -> str:
        return self.format()
