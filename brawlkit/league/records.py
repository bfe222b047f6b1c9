"""The league's records, as plain data: who is in the pool and what happened.

A :class:`Member` is one registered player: a frozen checkpoint of a training
role, or one of the permanent members (the scripted baseline and the built-in CPU
levels).  A :class:`MatchRecord` is one finished match between two members.  Both
are written as JSON (``to_json`` / ``from_json``) by the pool
(:mod:`brawlkit.league.directory`), read back by the ratings
(:mod:`brawlkit.league.ratings`) and by the opponent samplers.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

#: training roles (docs/league.md)
ROLES = ("main", "main_exploiter", "league_exploiter")
#: the permanent members' roles
PERMANENT_ROLES = ("baseline", "cpu")
BASELINE_ID = "baseline"


def cpu_id(level: int) -> str:
    """Member id of the built-in CPU at ``level`` (also its env opponent spec)."""
    return CpuLevel(level).spec


def permanent_ids() -> tuple[str, ...]:
    return (BASELINE_ID, *(cpu_id(lv) for lv in CPU_LEVELS))


@dataclass(frozen=True)
class MemberId:
    """The id of a trained member: ``<role>-<run>-gNNNN`` (docs/league.md).

    One place formats it and one place takes it apart: the role is the part before
    the first ``-`` (roles have none), the generation the ``-g`` suffix (at least
    four digits), the run name everything between (run names may hold ``-``), so a
    registry checkpoint resumes as generation N+1 of the same run."""

    role: str
    run: str
    generation: int

    def __str__(self) -> str:
        return f"{self.role}-{self.run}-g{self.generation:04d}"

    @classmethod
    def parse(cls, text: str) -> MemberId:
        """The parts of ``text``; ``ValueError`` naming the expected shape otherwise."""
        m = _MEMBER_ID_RE.fullmatch(text) if isinstance(text, str) else None
        if m is None or m["role"] not in ROLES:
            raise ValueError(f"member id {text!r} is not <role>-<run>-gNNNN with role one "
                             f"of {ROLES}")
        return cls(m["role"], m["run"], int(m["gen"]))


_MEMBER_ID_RE = re.compile(r"(?P<role>[a-z_]+)-(?P<run>.+)-g(?P<gen>\d{4,})")


#: the id of a person who played without an identity (docs/ratings.md: rated at the
#: initial rating, never moved, never listed)
ANONYMOUS_ID = "anonymous"
#: ids of registered human players: ``player:NAME`` (the registry's POST /players)
PLAYER_PREFIX = "player:"
#: a player's name: short, printable, no separator that a ticket or an id uses
PLAYER_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,24}")
#: what an id of the ratings is: a trained checkpoint, the scripted baseline, a
#: built-in CPU level, or a registered human player
KINDS = ("bot", "baseline", "cpu", "human")


def player_id(name: str) -> str:
    """The match-log id of the registered player ``name`` (``ValueError`` if the name
    is not one a player may have)."""
    if not isinstance(name, str) or not PLAYER_NAME_RE.fullmatch(name):
        raise ValueError(f"player name {name!r} must match {PLAYER_NAME_RE.pattern}")
    return PLAYER_PREFIX + name


def player_name(member_id: str) -> str | None:
    """``NAME`` of a ``player:NAME`` id, None for any other id."""
    if member_id.startswith(PLAYER_PREFIX):
        return member_id[len(PLAYER_PREFIX):]
    return None


def is_reserved_id(member_id: str) -> bool:
    """Ids no league member may take: ``anonymous`` and the ``player:`` namespace."""
    return member_id == ANONYMOUS_ID or member_id.startswith(PLAYER_PREFIX)


def id_kind(member_id: str, role: str | None = None) -> str:
    """The kind (:data:`KINDS`) of an id of the match log: by its member ``role``
    when it is a member, else by its shape (``player:`` is human, ``cpu:L`` a CPU
    level, ``baseline`` the baseline; anything else is a trained checkpoint whose
    record is not at hand)."""
    if member_id.startswith(PLAYER_PREFIX):
        return "human"
    if role == "baseline" or (role is None and member_id == BASELINE_ID):
        return "baseline"
    if role == "cpu" or (role is None and member_id in permanent_ids()):
        return "cpu"
    return "bot"


@dataclass(frozen=True)
class Member:
    """One player of the pool.

    ``checkpoint`` / ``blob``: paths relative to the league directory of the SB3 zip
    and the ``.bpw`` (None for permanent members).  ``settings``: how it was trained
    (the TrainConfig dict).  ``created``: ISO-8601 UTC time of registration.
    """

    id: str
    role: str
    generation: int = 0
    parent: str | None = None
    created: str = ""
    checkpoint: str | None = None
    blob: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def permanent(self) -> bool:
        return self.role in PERMANENT_ROLES

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Member:
        """A member from its record; ``ValueError`` naming what is missing or wrong."""
        if not isinstance(data, dict):
            raise ValueError("a member record is a JSON object")
        try:
            m = cls(id=str(data["id"]), role=str(data["role"]),
                    generation=int(data.get("generation", 0)), parent=data.get("parent"),
                    created=str(data.get("created", "")), checkpoint=data.get("checkpoint"),
                    blob=data.get("blob"), settings=dict(data.get("settings") or {}))
        except (KeyError, TypeError) as e:
            raise ValueError(f"member record without a valid {e}") from None
        if m.role not in ROLES + PERMANENT_ROLES:
            raise ValueError(f"member {m.id!r} has unknown role {m.role!r}")
        if not m.id or "/" in m.id or m.id.startswith("."):
            raise ValueError(f"member id {m.id!r} is not a plain name")
        if is_reserved_id(m.id):
            raise ValueError(f"member id {m.id!r} is reserved for human players "
                             f"({ANONYMOUS_ID!r} and {PLAYER_PREFIX}NAME)")
        return m


#: result codes of a match, from player a's side
RESULTS = {"win": 1.0, "draw": 0.5, "loss": 0.0}


@dataclass(frozen=True)
class MatchRecord:
    """One finished match: ``a`` against ``b``, ``result`` from a's side
    (``win`` / ``draw`` / ``loss``), ``ticks`` played, ``time`` (epoch seconds),
    ``source`` (who played it: ``train:<role>``, ``eval``, ``botpool``, ...).

    Besides member ids, ``a`` and ``b`` may be a registered human player,
    ``player:NAME`` (NAME as :data:`PLAYER_NAME_RE`), or ``anonymous`` (a person
    without an identity); docs/ratings.md says how they are rated.

    A match *is* its content: a league directory and the registry both count
    identical records once (so a batch can be resent, and matches pulled twice do
    not count twice).  A writer of several matches at one moment gives each its own
    time (see ``LeagueTrainee.register``)."""

    time: float
    a: str
    b: str
    result: str
    ticks: int = 0
    source: str = ""

    @property
    def sort_key(self) -> tuple[float, str, str, str, int, str]:
        """The canonical replay order: by time, ties broken by content.  Every store of
        matches (a league directory, the registry) replays in this order, so the same
        matches give the same Elo to the last digit wherever they are stored."""
        return (self.time, self.a, self.b, self.result, self.ticks, self.source)

    @property
    def score(self) -> float:
        """a's score: 1 win, 0.5 draw, 0 loss."""
        return RESULTS[self.result]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MatchRecord:
        if not isinstance(data, dict):
            raise ValueError("a match record is a JSON object")
        try:
            r = cls(time=float(data["time"]), a=str(data["a"]), b=str(data["b"]),
                    result=str(data["result"]), ticks=int(data.get("ticks", 0)),
                    source=str(data.get("source", "")))
        except (KeyError, TypeError) as e:
            raise ValueError(f"match record without a valid {e}") from None
        if r.result not in RESULTS:
            raise ValueError(f"match result {r.result!r} is not one of {sorted(RESULTS)}")
        if r.a == r.b:
            raise ValueError(f"a match of {r.a!r} against itself")
        for side in (r.a, r.b):
            name = player_name(side)
            if name is not None and not PLAYER_NAME_RE.fullmatch(name):
                raise ValueError(f"player id {side!r}: the name must match "
                                 f"{PLAYER_NAME_RE.pattern}")
        return r
