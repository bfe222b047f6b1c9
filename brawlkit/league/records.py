"""The league's records, as plain data: who is in the pool and what happened.

A :class:`Member` is one registered player: a frozen checkpoint of a training
role, or one of the permanent members (the scripted baseline and the built-in CPU
levels).  A :class:`MatchRecord` is one finished match between two members.  Both
are written as JSON (``to_json`` / ``from_json``) by the pool
(:mod:`brawlkit.league.directory`), read back by the ratings
(:mod:`brawlkit.league.ratings`) and by the opponent samplers.
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from brawlkit.league.role_specs import role_names
from brawlkit.wire.cpu_level import CPU_LEVELS, CpuLevel

# a training role is one declared in brawlkit/league/role_specs.py (role_names())
#: the permanent members' roles
PERMANENT_ROLES = ("baseline", "cpu")
BASELINE_ID = "baseline"
#: the built-in CPU levels' ids: ``cpu:L`` (every ``cpu:`` id is theirs)
CPU_PREFIX = "cpu:"

# ------------------------------------------------------------ ids and names
#: the longest id (a member, a checkpoint, an agent, a match side)
ID_LEN = 200
#: the characters of an id: ASCII letters and digits and ``_ . - : + @``, the first
#: one a letter or a digit.  Printable everywhere, the same in every file system
#: and URL (no space, no ``%``, no ``/`` or ``\\``, no look-alike or bidi character)
ID_CHARS = "A-Za-z0-9_.:+@-"
ID_RE = re.compile(rf"[A-Za-z0-9][{ID_CHARS}]{{0,{ID_LEN - 1}}}")
_ID_CHAR = re.compile(f"[{ID_CHARS}]")
#: names a file may not have on Windows (a league directory synced to one, a
#: notebook's drive): an id is a file name there (``members/<id>.json``)
DEVICE_NAMES = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
                          *(f"LPT{i}" for i in range(10))})


def id_problem(name: object, what: str = "id") -> str:
    """Why ``name`` is not an id (empty string if it is): 1 to :data:`ID_LEN` of
    :data:`ID_CHARS`, starting with a letter or digit, not a Windows device name.
    The one rule of the ids of members, checkpoints, agents and match sides, used
    by the league directory, the registry service and its client alike."""
    if not isinstance(name, str) or not name:
        return f"{what} must be a non-empty string"
    if len(name) > ID_LEN:
        return f"{what} is longer than {ID_LEN} characters"
    if ID_RE.fullmatch(name):
        if name.split(".")[0].upper() in DEVICE_NAMES:
            return f"{what} {name!r} is a device name on Windows (CON, NUL, COM1, ...)"
        return ""
    if name.startswith("."):
        return f"{what} {name!r} starts with '.'"
    bad = next((c for c in name if not _ID_CHAR.fullmatch(c)), "")
    if not bad:
        return f"{what} {name!r} must start with a letter or digit"
    if bad in "/\\" or not bad.isprintable():
        return (f"{what} {ascii(name)} contains '/', '\\' or a control character "
                f"(U+{ord(bad):04X}); an id is 1 to {ID_LEN} of [{ID_CHARS}]")
    return (f"{what} {ascii(name)} has the character {ascii(bad)} (U+{ord(bad):04X}); an id "
            f"is 1 to {ID_LEN} of [{ID_CHARS}], starting with a letter or digit")


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
        if m is None or m["role"] not in role_names():
            raise ValueError(f"member id {text!r} is not <role>-<run>-gNNNN with role one "
                             f"of {role_names()}")
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
Kind = Literal["bot", "baseline", "cpu", "human"]
KINDS: tuple[str, ...] = get_args(Kind)


#: names no human player may take (any case): they would read as the anonymous
#: crowd, the scripted baseline or a CPU level wherever a name is shown
RESERVED_PLAYER_NAMES = frozenset({ANONYMOUS_ID, BASELINE_ID, "cpu"})


def player_name_problem(name: object) -> str:
    """Why ``name`` is not a name a player may have ('' if it is)."""
    if not isinstance(name, str) or not PLAYER_NAME_RE.fullmatch(name):
        return (f"player name {ascii(name)[:60]} must be 1 to 24 letters, digits, '_', '.' "
                "or '-'")
    if name.lower() in RESERVED_PLAYER_NAMES or name.split(".")[0].upper() in DEVICE_NAMES:
        return f"player name {name!r} is reserved ({', '.join(sorted(RESERVED_PLAYER_NAMES))})"
    return ""


def player_id(name: str) -> str:
    """The match-log id of the registered player ``name`` (``ValueError`` if the name
    is not one a player may have)."""
    why = player_name_problem(name)
    if why:
        raise ValueError(why)
    return PLAYER_PREFIX + name


def player_name(member_id: str) -> str | None:
    """``NAME`` of a ``player:NAME`` id, None for any other id."""
    if member_id.startswith(PLAYER_PREFIX):
        return member_id[len(PLAYER_PREFIX):]
    return None


def is_reserved_id(member_id: str) -> bool:
    """Ids no league member may take: ``anonymous`` and the ``player:`` namespace."""
    return member_id == ANONYMOUS_ID or member_id.startswith(PLAYER_PREFIX)


def side_problem(side: object, what: str = "id") -> str:
    """Why ``side`` cannot be one side of a match ('' if it can): ``player:NAME`` with
    a NAME a player may have, or any other id (above)."""
    name = player_name(side) if isinstance(side, str) else None
    if name is not None:
        why = player_name_problem(name)
        return f"player id {ascii(side)[:60]} ({what}): {why}" if why else ""
    return id_problem(side, what)


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
            m = cls(id=data["id"], role=data["role"],
                    generation=_integer(data.get("generation", 0), "generation", MAX_GENERATION),
                    parent=data.get("parent"), created=data.get("created", ""),
                    checkpoint=data.get("checkpoint"), blob=data.get("blob"),
                    settings=dict(data.get("settings") or {}))
        except (KeyError, TypeError) as e:
            raise ValueError(f"member record without a valid {e}") from None
        why = id_problem(m.id, "member id")
        if why:
            raise ValueError(f"member id {ascii(m.id)[:80]} is not a plain name: {why}")
        if m.role not in role_names() + PERMANENT_ROLES:
            raise ValueError(f"member {m.id!r} has unknown role {m.role!r}")
        if is_reserved_id(m.id):
            raise ValueError(f"member id {m.id!r} is reserved for human players "
                             f"({ANONYMOUS_ID!r} and {PLAYER_PREFIX}NAME)")
        if m.id.startswith(CPU_PREFIX) and m.id not in permanent_ids():
            raise ValueError(f"member id {m.id!r} is reserved for the built-in CPU levels "
                             f"({CPU_PREFIX}1 ... {CPU_PREFIX}{CPU_LEVELS[-1]})")
        if m.parent is not None:
            why = id_problem(m.parent, "parent")
            if why:
                raise ValueError(why)
            if m.parent == m.id:
                raise ValueError(f"member {m.id!r} is its own parent")
        if not isinstance(m.created, str):
            raise ValueError(f"member {m.id!r}: created {m.created!r} is not an ISO-8601 text")
        return m


#: the largest generation a member may have (a signed 32-bit integer everywhere)
MAX_GENERATION = 2**31 - 1
#: the most ticks a match may have: 2**31 - 1, a signed 32-bit tick counter (a
#: year of play at 60 ticks/s; a real match has thousands)
MAX_TICKS = 2**31 - 1
#: the longest ``source`` of a match
SOURCE_LEN = ID_LEN
#: digits an integer of a record may have before it is refused unread (Python
#: refuses to read more than 4300 anyway, and would refuse the whole file)
MAX_INT_DIGITS = 24


def _shown(value: object) -> str:
    """``value`` for a message: short, and never a conversion that can fail (an int
    of thousands of digits has no ``str``)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    return ascii(value)[:60]


def _integer(value: object, what: str, maximum: int) -> int:
    """``value`` as an integer in [0, maximum]: a JSON integer (not a bool, not 1.5,
    not "5"); ``ValueError`` naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what} must be an integer, not {_shown(value)}")
    number = int(value)
    if not 0 <= number <= maximum:
        raise ValueError(f"{what} {_shown(number)} is outside [0, {maximum}]")
    return number


#: the window a match's ``time`` must lie in, epoch seconds: [MIN_TIME, MAX_TIME), i.e.
#: from 1970-01-01 00:00:00 UTC up to (not including) 3000-01-01 00:00:00 UTC.  Every
#: time in it is a date every reader can print (Python's datetime stops at year 9999,
#: and the league page printed a stored 1e308 as a 500 for every reader), and a writer
#: that sends milliseconds (1.8e12 today) or a negative time is refused at the door
MIN_TIME = 0.0
MAX_TIME = 32_503_680_000.0
TIME_WINDOW = "[1970-01-01, 3000-01-01) UTC"


def match_time(value: object) -> float:
    """A match's ``time``: a number of epoch seconds (not a string, not a bool) in
    :data:`MIN_TIME` ≤ time < :data:`MAX_TIME` (docs/league.md, "The match-record rule")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"time must be a number (epoch seconds), not {_shown(value)}")
    try:
        t = float(value)
    except OverflowError:
        raise ValueError(f"time {_shown(value)} is too large") from None
    if not math.isfinite(t):
        raise ValueError(f"time {_shown(value)} is not finite (no place in the replay order)")
    if not MIN_TIME <= t < MAX_TIME:
        hint = " (milliseconds? a match time is in seconds)" if t >= MAX_TIME else ""
        raise ValueError(f"time {t!r} is outside the window of match times {TIME_WINDOW}: "
                         f"epoch seconds in [{MIN_TIME:.0f}, {MAX_TIME:.0f}){hint}")
    return t


#: the largest match seed (the game server's seed is an unsigned 32-bit integer)
MAX_SEED = 2**32 - 1


def match_seed(value: object) -> int | None:
    """A match's ``seed``: the game's match seed, an integer in [0, :data:`MAX_SEED`],
    or None when the writer did not choose it (a person's game, a bot-pool fight)."""
    return None if value is None else _integer(value, "seed", MAX_SEED)


#: how one side of a match played (docs/ratings.md, "Who is rated"):
#: ``fixed`` — the player its id names, unchanged: a frozen member's shipped policy
#: (deterministic, the clipped Gaussian mean, as ``brawlpit_bot`` plays it), a CPU
#: level, the baseline, a person;
#: ``sampled`` — a frozen member's policy played with its Gaussian noise;
#: ``training`` — weights that were still training (the id is the member they were
#: registered as when the generation ended)
Policy = Literal["fixed", "sampled", "training"]
POLICIES: tuple[str, ...] = get_args(Policy)
#: the source prefix of a trainer's own games (``train:<role>``)
TRAIN_SOURCE = "train:"


def default_policy(source: str, side: str) -> str:
    """How a side played when its record does not say: side ``a`` of a trainer's game
    (source ``train:<role>``) was the policy in training, every other side the fixed
    player.  Records written before the field existed read right, and a record says
    its policies only where they differ from this (its JSON, hence its identity in a
    registry, is unchanged for them)."""
    return "training" if side == "a" and source.startswith(TRAIN_SOURCE) else "fixed"


def match_policy(value: object, what: str = "a_policy") -> str:
    if not isinstance(value, str) or value not in POLICIES:
        raise ValueError(f"{what} {_shown(value)} is not one of {list(POLICIES)}")
    return value


def match_ticks(value: object) -> int:
    """A match's ``ticks``: an integer in [0, :data:`MAX_TICKS`]."""
    return _integer(value, "ticks", MAX_TICKS)


def match_side(value: object, what: str = "a") -> str:
    """A match's ``a`` or ``b``: an id (:func:`side_problem`)."""
    why = side_problem(value, what)
    if why:
        raise ValueError(why)
    return str(value)


def match_result(value: object) -> str:
    if not isinstance(value, str) or value not in RESULTS:
        raise ValueError(f"result {_shown(value)} is not one of {sorted(RESULTS)}")
    return value


def match_source(value: object) -> str:
    """A match's ``source``: printable text of at most :data:`SOURCE_LEN` characters."""
    if not isinstance(value, str) or len(value) > SOURCE_LEN or not value.isprintable():
        raise ValueError(f"source {_shown(value)} must be printable text (no NUL or other "
                         f"control character) of at most {SOURCE_LEN} characters")
    return value


#: result codes of a match, from player a's side
Result = Literal["win", "draw", "loss"]
RESULTS: dict[str, float] = dict(zip(get_args(Result), (1.0, 0.5, 0.0), strict=True))


@dataclass(frozen=True)
class MatchRecord:
    """One finished match: ``a`` against ``b``, ``result`` from a's side
    (``win`` / ``draw`` / ``loss``), ``ticks`` played, ``time`` (epoch seconds, when
    it ended), ``source`` (who played it: ``train:<role>``, ``eval``, ``ladder``,
    ``botpool``, ...), ``seed`` (the game's match seed, None when not chosen by the
    writer) and how each side played, ``a_policy`` / ``b_policy`` (:data:`POLICIES`;
    empty: :func:`default_policy`).  Only games of two fixed players are rated.

    Besides member ids, ``a`` and ``b`` may be a registered human player,
    ``player:NAME`` (NAME as :data:`PLAYER_NAME_RE`), or ``anonymous`` (a person
    without an identity); docs/ratings.md says how they are rated.

    A match *is* its content: a league directory and the registry both count
    identical records once (so a batch can be resent, and matches pulled twice do
    not count twice).  A writer of several matches at one moment gives each its own
    time: the one match writer's time rule (:class:`~brawlkit.league.sink.MatchSink`)."""

    time: float
    a: str
    b: str
    result: str
    ticks: int = 0
    source: str = ""
    seed: int | None = None
    a_policy: str = ""
    b_policy: str = ""

    def __post_init__(self) -> None:
        # an unsaid policy is the default one: one record, one content, however made
        for side in ("a", "b"):
            if not getattr(self, f"{side}_policy"):
                object.__setattr__(self, f"{side}_policy", default_policy(self.source or "", side))

    @property
    def sort_key(self) -> tuple[float, str, str, str, int, str, int, str, str]:
        """The canonical replay order: by time, ties broken by content.  Every store of
        matches (a league directory, the registry) replays in this order, so the same
        matches give the same Elo to the last digit wherever they are stored."""
        return (self.time, self.a, self.b, self.result, self.ticks, self.source,
                -1 if self.seed is None else self.seed, self.a_policy, self.b_policy)

    @property
    def rated(self) -> bool:
        """Whether the ratings count this game: both sides were fixed players
        (docs/ratings.md, "Who is rated")."""
        return self.a_policy == "fixed" and self.b_policy == "fixed"

    @property
    def score(self) -> float:
        """a's score: 1 win, 0.5 draw, 0 loss."""
        return RESULTS[self.result]

    def to_json(self) -> dict[str, Any]:
        """The record as JSON: ``seed`` only when known and each policy only when it
        is not :func:`default_policy`, so a record of the older shape keeps its exact
        JSON (and its identity, the registry's digest of it)."""
        out = {k: v for k, v in asdict(self).items()
               if k not in ("seed", "a_policy", "b_policy")}
        if self.seed is not None:
            out["seed"] = self.seed
        for side in ("a", "b"):
            policy = getattr(self, f"{side}_policy")
            if policy != default_policy(self.source, side):
                out[f"{side}_policy"] = policy
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MatchRecord:
        """The record of ``data``; ``ValueError`` naming the first field that breaks
        the rule (docs/league.md, "The match-record rule").  The one check of a
        match: the league directory's reader and writer, the registry's request
        schema and the registry client all call it."""
        if not isinstance(data, dict):
            raise ValueError("a match record is a JSON object")
        missing = [k for k in ("time", "a", "b", "result") if k not in data]
        if missing:
            raise ValueError(f"match record without {', '.join(missing)}")
        r = cls(time=match_time(data["time"]), a=match_side(data["a"], "a"),
                b=match_side(data["b"], "b"), result=match_result(data["result"]),
                ticks=match_ticks(data.get("ticks", 0)),
                source=match_source(data.get("source", "")),
                seed=match_seed(data.get("seed")),
                a_policy=match_policy(data["a_policy"], "a_policy") if "a_policy" in data else "",
                b_policy=match_policy(data["b_policy"], "b_policy") if "b_policy" in data else "")
        if r.a == r.b:
            raise ValueError(f"a match of {r.a!r} against itself")
        return r

    @classmethod
    def from_line(cls, raw: bytes | str) -> MatchRecord:
        """The record of one JSON line of a match log; ``ValueError`` saying why not
        — never another exception, whatever the line holds (``Infinity``, ``1e999``,
        an integer of thousands of digits, a nesting too deep for the parser)."""
        try:
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError:
            raise ValueError("not UTF-8 text") from None
        try:
            obj = json.loads(text, parse_int=_json_int)  # NaN, Infinity: the rule names the field
        except json.JSONDecodeError as e:
            raise ValueError(f"not valid JSON, half-written or corrupt ({e.msg})") from None
        except RecursionError:
            raise ValueError("not valid JSON (nested too deeply)") from None
        except ValueError as e:
            raise ValueError(f"not a match record ({e})") from None
        try:
            return cls.from_json(obj)
        except ValueError as e:
            raise ValueError(f"not a match record ({e})") from None


def verified_standing(members: Sequence[Member], matches: Iterable[MatchRecord],
                      role: str = "main", against: str = "main_exploiter"
                      ) -> list[tuple[int, float, float]]:
    """Per generation of ``role``: its deterministic policy's win rate (draws half) in its
    verification matches (``--main-verify-matches``: fixed against fixed, source ``eval``)
    against ``against``'s members — the lowest over those opponents and the mean, as
    ``(generation, lowest, mean)``.  Empty for a league that did not verify.  Why it is
    read at all: over league_144_verify_long's three seeds the lowest forecast how easily
    the final Main was exploited (on league_144_patch's seed 1 it did not: README); the
    overview plots it, ``bench learn`` prints it."""
    gen_of = {m.id: m.generation for m in members if m.role == role}
    others = {m.id for m in members if m.role == against}
    points: dict[int, dict[str, list[float]]] = {}
    for r in matches:
        if r.source == "eval" and r.a in gen_of and r.b in others:
            points.setdefault(gen_of[r.a], {}).setdefault(r.b, []).append(r.score)
    out = []
    for g in sorted(points):
        rates = [sum(v) / len(v) for v in points[g].values()]
        out.append((g, min(rates), sum(rates) / len(rates)))
    return out


def _json_int(text: str) -> int:
    """JSON integers of a record: refused unread past :data:`MAX_INT_DIGITS` digits."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)
