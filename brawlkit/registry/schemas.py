"""The registry API's shapes: the pydantic models of requests and answers, the
annotated field types they share, and the error answers the routes document.

They are the OpenAPI document's ``components/schemas`` (their class names are the
schema names), so renaming one changes the API reference
(tests/test_registry_openapi.py notices).  Field rules that are the league's own
(a member record's) are checked again by the league's code in the routes; the ones
here keep what is stored printable by every database (no NUL, valid Unicode).
Ids, player names and every field of a match are the league's own rules
(:mod:`brawlkit.league.records`: ``id_problem``, ``player_name_problem``, the
``match_*`` field checks), called by the validators below, so the registry accepts
exactly what a league directory does — never more, never less.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    model_validator,
)

from brawlkit.league.records import (
    ID_CHARS,
    ID_LEN,
    MAX_GENERATION,
    MAX_SEED,
    MAX_TICKS,
    MAX_TIME,
    MIN_TIME,
    PLAYER_NAME_RE,
    SOURCE_LEN,
    Kind,
    Policy,
    Result,
    id_problem,
    match_policy,
    match_result,
    match_seed,
    match_side,
    match_source,
    match_ticks,
    match_time,
    player_name_problem,
)
from brawlkit.league.role_specs import check_role, settled_roles
from brawlkit.registry.auth import MAX_TOKEN_CHARS, Scope
from brawlkit.registry.database import TEXT_LEN, Status

API_VERSION = "1.3"  # 1.1: players, tickets, kinds in /ratings; 1.2: revocation, 429; 1.3: match seed and policies, time window, rated games and the anchor in /ratings
#: how far ahead of the service's clock a checkpoint's ``created`` may be (clock skew
#: between machines; a time further ahead would sort after every real registration)
MAX_FUTURE_S = 24 * 3600
#: the documented shape of an id (the rule itself is records.id_problem)
ID_PATTERN = f"^[A-Za-z0-9][{ID_CHARS}]{{0,{ID_LEN - 1}}}$"


def text_ok(value: str) -> str:
    """Free text is stored and served everywhere: no NUL (PostgreSQL refuses it), valid
    Unicode (no lone surrogates, which no database encodes)."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode text") from None
    return value


def _plain(value: str) -> str:
    why = id_problem(value, "id")
    if why:
        raise ValueError(why)
    return value


def _player_name(value: str) -> str:
    why = player_name_problem(value)
    if why:
        raise ValueError(why)
    return value


def _iso_time(value: str) -> str:
    """``created`` orders checkpoints (registration order, the newest of a role) as a
    string, so it must be one kind of string: an ISO-8601 time with its timezone (a
    naive one means a different instant on every machine), not further ahead of the
    service's clock than :data:`MAX_FUTURE_S` (it would sort after every later
    registration) — or empty: the server fills it in."""
    if value:
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO-8601 time, e.g. 2026-12-01T03:15:00.000000+00:00 "
                             "(or empty: the server fills it in)") from None
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"{value!r} has no timezone: give one, e.g. "
                             "2026-12-01T03:15:00+00:00")
        if when.timestamp() > time.time() + MAX_FUTURE_S:
            raise ValueError(f"{value!r} is more than {MAX_FUTURE_S // 3600} h ahead of the "
                             "registry's clock")
    return value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


FreeText = Annotated[str, Field(max_length=TEXT_LEN), AfterValidator(text_ok)]
#: a training role: one declared in brawlkit/league/role_specs.py (checked against the
#: declarations, so a declared role is a role here too)
Role = Annotated[str, Field(json_schema_extra={"enum": [s.name for s in settled_roles()]}),
                 AfterValidator(check_role)]
PlainName = Annotated[str, Field(min_length=1, max_length=ID_LEN,
                                  json_schema_extra={"pattern": ID_PATTERN}),
                      AfterValidator(_plain)]
Sha256 = Annotated[str, BeforeValidator(_lower), Field(pattern=r"^[0-9a-f]{64}$")]


class ErrorModel(BaseModel):
    detail: Any = Field(description="what was wrong (a message; a list of field errors for 422)")


class TokenRequest(BaseModel):
    agent_id: str = Field(max_length=ID_LEN, description="the agent's name (add-agent NAME)")
    secret: str = Field(max_length=256, description="the secret add-agent printed once")


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int = Field(description="seconds until the token expires")
    scope: Scope


class CheckpointMetadata(BaseModel):
    """The ``metadata`` part of an upload: a league Member record
    (``Member.to_json()``; its ``checkpoint``/``blob`` paths are ignored) plus where it
    comes from and the sha256 of each file part."""

    model_config = ConfigDict(extra="ignore")
    id: PlainName
    role: Role
    generation: StrictInt = Field(0, ge=0, le=MAX_GENERATION)
    parent: PlainName | None = Field(None, description="a stored checkpoint, not this one")
    created: Annotated[str, Field(max_length=64), AfterValidator(text_ok),
                       AfterValidator(_iso_time)] = Field(
        "", description="ISO-8601 registration time with a timezone, at most a day ahead "
        "of the registry's clock; empty: the server fills it in")
    settings: dict[str, Any] = Field(default_factory=dict,
                                     description="how it was trained (the TrainConfig dict)")
    location: FreeText = Field("", description="free text: which machine / league it comes from")
    checkpoint_sha256: Sha256
    blob_sha256: Sha256 | None = None

    @model_validator(mode="after")
    def _not_its_own_parent(self) -> CheckpointMetadata:
        if self.parent == self.id:
            raise ValueError(f"parent: checkpoint {self.id!r} cannot be its own parent")
        return self


class CheckpointRecord(BaseModel):
    id: str
    role: str
    generation: int
    parent: str | None
    created: str
    settings: dict[str, Any]
    location: str
    checkpoint_sha256: str
    checkpoint_size: int
    blob_sha256: str | None
    blob_size: int | None
    status: Status
    uploaded: str = Field(description="server time the record was committed (ISO-8601 UTC)")
    uploaded_by: str = Field(description="the agent that uploaded it")


class MatchOut(BaseModel):
    """One match, as ``MatchRecord.to_json()`` writes it."""

    model_config = ConfigDict(extra="ignore")
    time: Annotated[float, BeforeValidator(match_time), Field(ge=MIN_TIME, lt=MAX_TIME)] = Field(
        description="when it ended, epoch seconds in [1970-01-01, 3000-01-01) UTC")
    a: Annotated[str, BeforeValidator(match_side), Field(
        min_length=1, max_length=ID_LEN, json_schema_extra={"pattern": ID_PATTERN})] = Field(
        description="a member id, player:NAME or anonymous")
    b: Annotated[str, BeforeValidator(lambda v: match_side(v, "b")), Field(
        min_length=1, max_length=ID_LEN, json_schema_extra={"pattern": ID_PATTERN})]
    result: Annotated[Result, BeforeValidator(match_result)] = Field(
        description="from a's side")
    ticks: Annotated[int, BeforeValidator(match_ticks), Field(ge=0, le=MAX_TICKS)] = 0
    source: Annotated[str, BeforeValidator(match_source), Field(max_length=SOURCE_LEN)] = ""
    seed: Annotated[Annotated[int, Field(ge=0, le=MAX_SEED)] | None,
                    BeforeValidator(match_seed)] = Field(
        None, description="the game's match seed (absent: not chosen by the writer)")
    a_policy: Annotated[Policy | None, BeforeValidator(
        lambda v: None if v is None else match_policy(v, "a_policy"))] = Field(
        None, description="how a played: fixed, sampled or training (absent: training for a "
        "train:<role> source, else fixed)")
    b_policy: Annotated[Policy | None, BeforeValidator(
        lambda v: None if v is None else match_policy(v, "b_policy"))] = Field(
        None, description="how b played (absent: fixed)")


TicketText = Annotated[str, Field(max_length=MAX_TOKEN_CHARS)]


class MatchIn(MatchOut):
    """One match to store: ``MatchRecord.to_json()`` plus, for a record naming a
    registered player, its ticket (not part of the match: never stored)."""

    ticket: TicketText | Annotated[list[TicketText], Field(max_length=2)] | None = Field(
        None, description="the ticket (POST /players/{name}/ticket) of the player:NAME "
        "side; a list of two for a match of two players")


PlayerName = Annotated[str, Field(pattern=PLAYER_NAME_RE.pattern.join("^$"),
                                  description="letters, digits, '_', '.', '-'; 1 to 24; "
                                  "not a reserved name (anonymous, baseline, cpu)"),
                       AfterValidator(_player_name)]


class PlayerIn(BaseModel):
    name: PlayerName


class PlayerCreated(BaseModel):
    name: str
    key: str = Field(description="the player's key, shown only now (the registry keeps a hash)")


class PlayerRecord(BaseModel):
    name: str
    created: str = Field(description="sign-up time (ISO-8601 UTC)")


class TicketResponse(BaseModel):
    ticket: str = Field(description="printable ASCII, at most 191 characters")
    expires: int = Field(description="epoch seconds")


class MatchBatchResult(BaseModel):
    accepted: int = Field(description="matches stored by this request")
    duplicates: int = Field(description="matches already stored (or repeated in the batch)")


class RatingRow(BaseModel):
    id: str
    role: str
    kind: Kind
    generation: int | None
    rating: float
    games: int
    wins: int
    draws: int
    losses: int
    win_rate: float | None
    bt_rating: float
    bt_lo: float | None
    bt_hi: float | None
    unrated: int = Field(0, description="its games not rated (training episodes, sampled "
                         "evaluations: a side that was not the fixed player)")
    few_games: bool = Field(False, description="rated on fewer than 30 games: provisional")


class Anchor(BaseModel):
    id: str
    rating: float


class RatingsTable(BaseModel):
    """Exactly ``python -m brawlkit elo --json`` (without ``league_dir``)."""

    members: list[RatingRow]
    matches: int
    rated_matches: int = Field(0, description="matches of two fixed players (the rated ones)")
    elo_initial: float | None = Field(None, description="a new member's Elo on the shown "
                                      "scale: initial, moved with the anchor (the mean of all)")
    anchor: Anchor | None = Field(None, description="the player pinned to a fixed rating, "
                                  "when it has rated games")
    k: float
    initial: float
    bootstrap: int
    seed: int
    bt_prior_games: float


class AgentRevoked(BaseModel):
    agent_id: str
    scope: Scope
    revoked: str = Field(description="when it was revoked (ISO-8601 UTC; the first time)")


class Health(BaseModel):
    status: Literal["ok"]
    schema_version: int
    api_version: str


# ------------------------------------------------------------ the documented errors
Responses = dict[int | str, dict[str, Any]]
E429: Responses = {429: {"model": ErrorModel, "description": "over the request rate: retry "
                         "after the Retry-After header's seconds"}}
E401: Responses = {
    401: {"model": ErrorModel, "description": "no, bad or expired token, or a revoked agent's"},
    403: {"model": ErrorModel, "description": "the token's scope is too low"}, **E429}
E400: Responses = {400: {"model": ErrorModel, "description": "malformed request or id"}}
E404: Responses = {404: {"model": ErrorModel, "description": "no such checkpoint"}}
IdPath = Annotated[str, Path(description="a checkpoint (member) id", max_length=1000)]
