"""The built-in CPU as an identifier: ``cpu:L`` in specs and match logs, ``cpu_L`` in keys.

The server's CPU (HELLO's and RESET's ``cpu_level``) is named in three places that
must agree: an env's opponent spec and a league member id (``"cpu:3"``), and an
evaluation or metric key (``"cpu_3"``: TensorBoard tags and JSON keys read better
without ``:``).  :class:`CpuLevel` formats and parses both forms here and only here,
with the level range the header declares (``BP_CPU_LEVEL_MIN..BP_CPU_LEVEL_MAX``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from brawlkit.wire.constants import C

#: every level of the built-in CPU, weakest first (from the header, never retyped)
CPU_LEVELS: tuple[int, ...] = tuple(range(int(C.BP_CPU_LEVEL_MIN), int(C.BP_CPU_LEVEL_MAX) + 1))
#: the prefix of a CPU spec / member id
SPEC_PREFIX = "cpu:"
#: the prefix of a CPU evaluation / metric key
KEY_PREFIX = "cpu_"


@dataclass(frozen=True, order=True)
class CpuLevel:
    """Level ``level`` of the built-in CPU (``ValueError`` outside the header's range)."""

    level: int

    def __post_init__(self) -> None:
        if isinstance(self.level, bool) or not isinstance(self.level, int) \
                or self.level not in CPU_LEVELS:
            raise ValueError(f"CPU level must be an integer in {CPU_LEVELS[0]}..{CPU_LEVELS[-1]}, "
                             f"got {self.level!r}")

    def __str__(self) -> str:
        return f"{SPEC_PREFIX}{self.level}"

    @property
    def spec(self) -> str:
        """``"cpu:L"``: the env opponent spec and the league member id."""
        return f"{SPEC_PREFIX}{self.level}"

    @property
    def key(self) -> str:
        """``"cpu_L"``: the evaluation / metric key (``eval/win_rate/cpu_L``)."""
        return f"{KEY_PREFIX}{self.level}"

    @staticmethod
    def is_spec(value: Any) -> bool:
        """Whether ``value`` names the built-in CPU (``"cpu:..."``; the level may still be bad)."""
        return isinstance(value, str) and value.startswith(SPEC_PREFIX)

    @classmethod
    def parse(cls, text: Any) -> CpuLevel:
        """``"cpu:L"`` -> ``CpuLevel(L)``; ``ValueError`` naming the expected form."""
        if cls.is_spec(text):
            digits = text[len(SPEC_PREFIX):]
            if digits.isdigit() and int(digits) in CPU_LEVELS:
                return cls(int(digits))
        raise ValueError(f"a CPU opponent is 'cpu:L' with L in {CPU_LEVELS[0]}..{CPU_LEVELS[-1]}, "
                         f"got {text!r}")

    @classmethod
    def from_key(cls, key: str) -> CpuLevel:
        """``"cpu_L"`` -> ``CpuLevel(L)``; ``ValueError`` for any other key."""
        digits = key[len(KEY_PREFIX):] if key.startswith(KEY_PREFIX) else ""
        if digits.isdigit() and int(digits) in CPU_LEVELS:
            return cls(int(digits))
        raise ValueError(f"a CPU key is 'cpu_L' with L in {CPU_LEVELS[0]}..{CPU_LEVELS[-1]}, "
                         f"got {key!r}")
