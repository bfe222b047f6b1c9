"""The registry API's shapes: the pydantic models of requests and answers, the
annotated field types they share, and the error answers the routes document.

They are the OpenAPI document's ``components/schemas`` (their class names are the
schema names), so renaming one changes the API reference
(tests/test_registry_openapi.py notices).  Field rules that are the league's own
(a member record's) are checked again by the league's code in the routes; the ones
here keep what is stored printable by every database (no NUL, valid Unicode) and
ids plain names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Path
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictInt

from brawlkit.league.records import PLAYER_NAME_RE
from brawlkit.registry.auth import MAX_TOKEN_CHARS
from brawlkit.registry.database import ID_LEN, TEXT_LEN, plain_name_problem

API_VERSION = "1.1"  # 1.1: players, tickets, kinds in /ratings


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
    why = plain_name_problem(value, "name")
    if why:
        raise ValueError(why)
    return value


def _iso_time(value: str) -> str:
    """``created`` orders checkpoints (registration order, the newest of a role) as a
    string, so it must be one kind of string: an ISO-8601 time (or empty: filled in)."""
    if value:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError("must be an ISO-8601 time, e.g. 2026-12-01T03:15:00.000000+00:00 "
                             "(or empty: the server fills it in)") from None
    return value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


FreeText = Annotated[str, Field(max_length=TEXT_LEN), AfterValidator(text_ok)]
PlainName = Annotated[str, Field(min_length=1, max_length=ID_LEN), AfterValidator(_plain)]
Sha256 = Annotated[str, BeforeValidator(_lower), Field(pattern=r"^[0-9a-f]{64}$")]
Status = Literal["registered", "active", "disabled"]


class ErrorModel(BaseModel):
    detail: Any = Field(description="what was wrong (a message; a list of field errors for 422)")


class TokenRequest(BaseModel):
    agent_id: str = Field(max_length=ID_LEN, description="the agent's name (add-agent NAME)")
    secret: str = Field(max_length=256, description="the secret add-agent printed once")


class TokenResponse(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int = Field(description="seconds until the token expires")
    scope: Literal["read", "write", "admin"]


class CheckpointMetadata(BaseModel):
    """The ``metadata`` part of an upload: a league Member record
    (``Member.to_json()``; its ``checkpoint``/``blob`` paths are ignored) plus where it
    comes from and the sha256 of each file part."""

    model_config = ConfigDict(extra="ignore")
    id: PlainName
    role: Literal["main", "main_exploiter", "league_exploiter"]
    generation: StrictInt = Field(0, ge=0, le=2**31 - 1)
    parent: PlainName | None = None
    created: Annotated[str, Field(max_length=64), AfterValidator(text_ok),
                       AfterValidator(_iso_time)] = Field(
        "", description="ISO-8601 UTC registration time; empty: the server fills it in")
    settings: dict[str, Any] = Field(default_factory=dict,
                                     description="how it was trained (the TrainConfig dict)")
    location: FreeText = Field("", description="free text: which machine / league it comes from")
    checkpoint_sha256: Sha256
    blob_sha256: Sha256 | None = None


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
    time: float = Field(allow_inf_nan=False, description="epoch seconds")
    a: PlainName = Field(description="a member id, player:NAME or anonymous")
    b: PlainName
    result: Literal["win", "draw", "loss"] = Field(description="from a's side")
    ticks: int = Field(0, ge=0, le=2**63 - 1)
    source: Annotated[str, Field(max_length=ID_LEN), AfterValidator(text_ok)] = ""


TicketText = Annotated[str, Field(max_length=MAX_TOKEN_CHARS)]


class MatchIn(MatchOut):
    """One match to store: ``MatchRecord.to_json()`` plus, for a record naming a
    registered player, its ticket (not part of the match: never stored)."""

    ticket: TicketText | Annotated[list[TicketText], Field(max_length=2)] | None = Field(
        None, description="the ticket (POST /players/{name}/ticket) of the player:NAME "
        "side; a list of two for a match of two players")


PlayerName = Annotated[str, Field(pattern=PLAYER_NAME_RE.pattern.join("^$"),
                                  description="letters, digits, '_', '.', '-'; 1 to 24")]


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
    kind: Literal["bot", "baseline", "cpu", "human"]
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


class RatingsTable(BaseModel):
    """Exactly ``python -m brawlkit elo --json`` (without ``league_dir``)."""

    members: list[RatingRow]
    matches: int
    k: float
    initial: float
    bootstrap: int
    seed: int
    bt_prior_games: float


class Health(BaseModel):
    status: Literal["ok"]
    schema_version: int
    api_version: str


# ------------------------------------------------------------ the documented errors
Responses = dict[int | str, dict[str, Any]]
E401: Responses = {
    401: {"model": ErrorModel, "description": "no, bad or expired token"},
    403: {"model": ErrorModel, "description": "the token's scope is too low"}}
E400: Responses = {400: {"model": ErrorModel, "description": "malformed request or id"}}
E404: Responses = {404: {"model": ErrorModel, "description": "no such checkpoint"}}
IdPath = Annotated[str, Path(description="a checkpoint (member) id", max_length=1000)]
