"""The registry's HTTP API (FastAPI): checkpoints, matches, ratings, the active checkpoint.

``/openapi.json`` (and ``/docs``) is the reference of every endpoint, request and
response; docs/registry.md summarises them and explains the rules.  This module is
only the HTTP layer: the rules live in :mod:`~brawlkit.registry.database` (what is
stored, in which transaction), :mod:`~brawlkit.registry.store` (the artifacts) and
:mod:`~brawlkit.registry.auth` (who may do what).

Why the upload is hand-parsed: ``POST /checkpoints`` streams its multipart body
straight into temp files in the store, hashing while the bytes arrive, and stops at
the size limit *while streaming* (a 413 before the rest is read; a framework form
parser would first spool the whole body elsewhere).  The upload is all or nothing:
the sha256 of every file is checked against the metadata, the files are fsynced,
the record is committed, and only then are the files linked into place; any failure
before the commit (a bad hash, a cut-off body, a conflicting id) deletes the temp
files, so neither a record nor a file is left behind.

Every answer to bad client input is a 4xx with a ``detail`` message: 400 malformed,
401 no/bad/expired token (with ``WWW-Authenticate: Bearer``) or player key, 403 scope
too low or a player's match without a valid ticket,
404 unknown id, 409 conflict, 413 too large, 415 not multipart, 422 invalid fields.
"""

# no ``from __future__ import annotations`` here: FastAPI evaluates the endpoints'
# annotations at runtime, and some of them name objects local to create_app()

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Header, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
)
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from brawlkit.export.bpw import blob_kind, compress_lz4, parse_bpw
from brawlkit.league.directory import permanent_members
from brawlkit.league.ratings import league_table
from brawlkit.league.records import (
    PLAYER_NAME_RE,
    ROLES,
    MatchRecord,
    Member,
    permanent_ids,
    player_name,
)
from brawlkit.registry.auth import (
    MAX_TOKEN_CHARS,
    TICKET_TTL_S,
    AuthError,
    Claims,
    TokenSigner,
    hash_secret,
    new_secret,
    scope_allows,
    verify_secret,
)
from brawlkit.registry.database import (
    ID_LEN,
    SCHEMA_VERSION,
    TEXT_LEN,
    Conflict,
    NewCheckpoint,
    NotFound,
    RegistryDB,
    plain_name_problem,
)
from brawlkit.registry.store import Store, TempBlob

API_VERSION = "1.1"  # 1.1: players, tickets, kinds in /ratings
#: the ``metadata`` part of an upload is JSON, not an artifact: 1 MiB is plenty
METADATA_MAX_BYTES = 1 << 20
MAX_MATCH_BATCH = 100_000
REALM = 'Bearer realm="brawlkit-registry"'


@dataclass
class Registry:
    """Everything a running service holds: the database, the store, the token signer,
    and its limits."""

    db: RegistryDB
    store: Store
    signer: TokenSigner
    max_upload_bytes: int = 64 << 20
    token_ttl: int = 3600
    ticket_ttl: int = TICKET_TTL_S


# ================================================================== models
def _text_ok(value: str) -> str:
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


FreeText = Annotated[str, Field(max_length=TEXT_LEN), AfterValidator(_text_ok)]
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
    created: Annotated[str, Field(max_length=64), AfterValidator(_text_ok),
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
    source: Annotated[str, Field(max_length=ID_LEN), AfterValidator(_text_ok)] = ""


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


# ================================================================== helpers
def _err(status: int, detail: str, headers: dict[str, str] | None = None) -> HTTPException:
    return HTTPException(status_code=status, detail=detail, headers=headers)


def _checked_id(checkpoint_id: str) -> str:
    """A path id that is not a plain name is refused before it reaches anything."""
    why = plain_name_problem(checkpoint_id, "checkpoint id")
    if why:
        raise _err(400, why)
    return checkpoint_id


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"number {text} is out of range")
    return x


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _metadata_of(raw: bytes) -> CheckpointMetadata:
    """Parse and validate the ``metadata`` part: 400 for what is not JSON, 422 for a
    JSON object that is not a valid record."""
    try:
        obj = json.loads(raw.decode("utf-8"), parse_float=_finite_float,
                         parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise _err(400, "metadata is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise _err(400, f"metadata is not valid JSON ({e.msg} at line {e.lineno} "
                        f"column {e.colno})") from None
    except RecursionError:
        raise _err(400, "metadata is nested too deeply") from None
    except ValueError as e:
        raise _err(400, f"metadata: {e}") from None
    if not isinstance(obj, dict):
        raise _err(422, "metadata must be a JSON object (a member record)")
    try:
        meta = CheckpointMetadata.model_validate(obj)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(p) for p in er['loc']) or 'metadata'}: {er['msg']}"
                         for er in e.errors()[:10])
        raise _err(422, f"metadata is not a valid checkpoint record: {msgs}") from None
    if meta.id in permanent_ids():
        raise _err(422, f"metadata: {meta.id!r} is a permanent member's id, never uploaded")
    try:  # the league's own rules, too
        Member.from_json(meta.model_dump())
        json.dumps(meta.settings, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as e:
        raise _err(422, f"metadata: {e}") from None
    return meta


class _Multipart:
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
            raise _err(400, f"malformed multipart body: {e}") from None

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
            raise _err(400, "every multipart part needs 'Content-Disposition: form-data; "
                            "name=...'")
        name = raw_name.decode("latin-1")
        if name == "metadata":
            if self.metadata is not None:
                raise _err(400, "the 'metadata' part is given twice")
            self.metadata = bytearray()
            self._target = self.metadata
        elif name in self.FILES:
            if name in self.files:
                raise _err(400, f"the {name!r} part is given twice")
            self.files[name] = self._target = self.store.temp()
        else:
            raise _err(400, f"unexpected multipart part {name[:60]!r} (the parts are "
                            "'metadata', 'checkpoint' and optionally 'blob')")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if isinstance(self._target, bytearray):
            if len(self._target) + (end - start) > METADATA_MAX_BYTES:
                raise _err(413, f"the metadata part is larger than {METADATA_MAX_BYTES} bytes")
            self._target.extend(data[start:end])
        elif self._target is not None:
            self._target.write(data[start:end])

    def _part_end(self) -> None:
        self._target = None

    def _end(self) -> None:
        self.done = True

    def discard(self) -> None:
        for blob in self.files.values():
            blob.discard()


class BodyLimit:
    """ASGI middleware: refuse a request body larger than ``limit`` bytes with 413 —
    at once when ``Content-Length`` says so, otherwise as soon as the streamed bytes
    pass it (chunked bodies), never after buffering the whole body."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared < 0:
                    await JSONResponse({"detail": "invalid Content-Length"},
                                       status_code=400)(scope, receive, send)
                    return
                if declared > self.limit:
                    await JSONResponse(
                        {"detail": f"request body of {declared} bytes is over the limit of "
                                   f"{self.limit} bytes (--max-upload-mb)"},
                        status_code=413)(scope, receive, send)
                    return
        seen = 0
        limit = self.limit

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _err(413, f"request body over the limit of {limit} bytes "
                                    "(--max-upload-mb)")
            return message

        await self.app(scope, limited, send)


# ================================================================== the app
def create_app(reg: Registry) -> FastAPI:
    """The FastAPI application of one registry (``reg``: database, store, signer)."""
    app = FastAPI(
        title="brawlkit checkpoint registry",
        version=API_VERSION,
        description="Checkpoints, matches and ratings shared by BRAWLPIT leagues. "
        "Authenticate with POST /auth/token, then send `Authorization: Bearer <token>`. "
        "Scopes: read < write < admin. docs/registry.md explains the rules.",
    )
    app.add_middleware(BodyLimit, limit=reg.max_upload_bytes)
    bearer = HTTPBearer(auto_error=False, description="a token from POST /auth/token")
    db, store = reg.db, reg.store

    @app.exception_handler(NotFound)
    async def _not_found(_req: Request, exc: NotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own handler echoes each bad input back, which cannot be rendered
        # when it is NaN (a 500) and may be megabytes: name the field and the problem only
        errors = [{"type": str(e.get("type", "")), "msg": str(e.get("msg", "")),
                   "loc": [p if isinstance(p, int) else str(p)[:100] for p in e.get("loc", ())]}
                  for e in exc.errors()[:50]]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(Conflict)
    async def _conflict(_req: Request, exc: Conflict) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    def require(scope: str) -> Any:
        def check(creds: Annotated[HTTPAuthorizationCredentials | None,
                                   Depends(bearer)]) -> Claims:
            if creds is None:
                raise _err(401, "a bearer token is needed (POST /auth/token)",
                           {"WWW-Authenticate": REALM})
            try:
                claims = reg.signer.verify(creds.credentials)
            except AuthError as e:
                raise _err(401, str(e), {"WWW-Authenticate":
                                         f'{REALM}, error="invalid_token"'}) from None
            if not scope_allows(claims.scope, scope):
                raise _err(403, f"agent {claims.agent_id!r} has scope {claims.scope!r}; "
                                f"this needs {scope!r}")
            return claims
        return Depends(check)

    read, write, admin = require("read"), require("write"), require("admin")
    Responses = dict[int | str, dict[str, Any]]
    e401: Responses = {
        401: {"model": ErrorModel, "description": "no, bad or expired token"},
        403: {"model": ErrorModel, "description": "the token's scope is too low"}}
    e400: Responses = {400: {"model": ErrorModel, "description": "malformed request or id"}}
    e404: Responses = {404: {"model": ErrorModel, "description": "no such checkpoint"}}
    IdPath = Annotated[str, Path(description="a checkpoint (member) id", max_length=1000)]

    def _record(checkpoint_id: str) -> dict[str, Any]:
        rec = db.checkpoint(_checked_id(checkpoint_id))
        if rec is None:
            raise NotFound(f"no checkpoint {checkpoint_id!r}")
        return rec

    # ------------------------------------------------------------ service
    @app.get("/health", summary="Liveness (no token)", response_model=Health, tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness, no token needed."""
        return {"status": "ok", "schema_version": SCHEMA_VERSION, "api_version": API_VERSION}

    @app.post("/auth/token", summary="Trade an agent's secret for a bearer token", response_model=TokenResponse, tags=["auth"],
              responses={401: {"model": ErrorModel, "description": "unknown agent or wrong "
                                                                   "secret"}})
    def token(req: TokenRequest) -> dict[str, Any]:
        """Trade an agent's id and secret for a short-lived bearer token."""
        found = None if plain_name_problem(req.agent_id) else db.agent(req.agent_id)
        ok = verify_secret(req.secret, None if found is None else found[0])
        if not ok or found is None:
            raise _err(401, "unknown agent or wrong secret", {"WWW-Authenticate": REALM})
        scope = found[1]
        return {"access_token": reg.signer.issue(req.agent_id, scope, reg.token_ttl),
                "token_type": "bearer", "expires_in": reg.token_ttl, "scope": scope}

    # ------------------------------------------------------------ players
    @app.post("/players", summary="Sign up a human player (no token)", status_code=201,
              response_model=PlayerCreated, tags=["players"],
              responses={409: {"model": ErrorModel, "description": "the name is taken"},
                         422: {"model": ErrorModel, "description": "not a valid name"}})
    def add_player(req: PlayerIn) -> JSONResponse:
        """Create a player; its key is in the answer, once (only a salted scrypt hash
        is stored).  Its matches are ``player:NAME`` in the match log."""
        key = new_secret()
        db.add_player(req.name, hash_secret(key))
        return JSONResponse({"name": req.name, "key": key}, status_code=201)

    @app.post("/players/{name}/ticket", summary="Trade a player's key for a ticket",
              response_model=TicketResponse, tags=["players"],
              responses={401: {"model": ErrorModel, "description":
                               "no key, unknown player or wrong key"}})
    def player_ticket(
        name: Annotated[str, Path(max_length=1000)],
        x_player_key: Annotated[str | None, Header(alias="X-Player-Key", max_length=256)] = None,
    ) -> dict[str, Any]:
        """A signed ticket naming the player, valid ``--ticket-ttl`` seconds: a bot
        that played this person posts it with the match (POST /matches)."""
        if not x_player_key:
            raise _err(401, "the player's key is needed (header X-Player-Key)")
        found = db.player(name) if PLAYER_NAME_RE.fullmatch(name) else None
        if not verify_secret(x_player_key, found) or found is None:
            raise _err(401, "unknown player or wrong key")
        ticket = reg.signer.issue_ticket(name, reg.ticket_ttl)
        return {"ticket": ticket, "expires": reg.signer.verify_ticket(ticket).expires}

    @app.get("/players", summary="The players' names (read)", response_model=list[PlayerRecord],
             tags=["players"], responses={**e401})
    def list_players(_c: Annotated[Claims, read]) -> JSONResponse:
        """Every player's name and sign-up time, by name (never a key)."""
        return JSONResponse(db.players())

    def _ticket_problem(name: str, tickets: list[str]) -> str:
        """Why none of ``tickets`` proves player ``name`` ('' when one does)."""
        if not tickets:
            return "the record carries no ticket"
        why = []
        for t in tickets:
            try:
                got = reg.signer.verify_ticket(t)
            except AuthError as e:
                why.append(str(e))
                continue
            if got.name == name:
                return ""
            why.append(f"the ticket is player {got.name!r}'s")
        return "; ".join(why)

    # ------------------------------------------------------------ checkpoints
    upload_body = {
        "required": True,
        "content": {"multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["metadata", "checkpoint"],
                "properties": {
                    "metadata": {"type": "string", "description":
                                 "JSON: a Member record (id, role, generation, parent, created, "
                                 "settings) plus location, checkpoint_sha256 and optional "
                                 "blob_sha256 (see the CheckpointMetadata schema)"},
                    "checkpoint": {"type": "string", "format": "binary",
                                   "description": "the SB3 checkpoint zip"},
                    "blob": {"type": "string", "format": "binary",
                             "description": "the raw .bpw (optional)"},
                },
            },
            "encoding": {"metadata": {"contentType": "application/json"}},
        }},
    }

    @app.post("/checkpoints", summary="Upload a checkpoint (multipart; write)", status_code=201, response_model=CheckpointRecord,
              tags=["checkpoints"], openapi_extra={"requestBody": upload_body},
              responses={200: {"model": CheckpointRecord, "description":
                               "the same checkpoint (same id, same sha256s) was stored already"},
                         **e400, **e401,
                         409: {"model": ErrorModel, "description":
                               "the id is registered with other content"},
                         413: {"model": ErrorModel, "description": "over --max-upload-mb"},
                         415: {"model": ErrorModel, "description": "not multipart/form-data"},
                         422: {"model": ErrorModel, "description": "invalid metadata"}})
    async def upload(request: Request, claims: Annotated[Claims, write]) -> JSONResponse:
        """Upload a checkpoint: multipart parts ``metadata`` (JSON, see
        CheckpointMetadata), ``checkpoint`` (the SB3 zip), optional ``blob`` (the raw
        .bpw).  All or nothing; 201 new, 200 repeat of an identical upload."""
        ctype, opts = parse_options_header(request.headers.get("content-type", ""))
        boundary = opts.get(b"boundary")
        if ctype != b"multipart/form-data" or not boundary or len(boundary) > 200:
            raise _err(415, "the upload is multipart/form-data with a boundary")
        parts = _Multipart(store, boundary)
        committed = False
        try:
            try:
                async for chunk in request.stream():
                    parts.feed(chunk)
            except ClientDisconnect:
                raise _err(400, "the upload was cut off (client disconnected)") from None
            if not parts.done:
                raise _err(400, "the multipart body ended before its closing boundary")
            if parts.metadata is None:
                raise _err(400, "no 'metadata' part")
            meta = _metadata_of(bytes(parts.metadata))
            ckpt, blob = parts.files.get("checkpoint"), parts.files.get("blob")
            if ckpt is None:
                raise _err(400, "no 'checkpoint' file part")
            if (blob is None) != (meta.blob_sha256 is None):
                raise _err(400, "a 'blob' part and metadata.blob_sha256 go together: "
                                "give both or neither")
            await run_in_threadpool(_finish_files, parts)
            for what, tmp, declared in (("checkpoint", ckpt, meta.checkpoint_sha256),
                                        ("blob", blob, meta.blob_sha256)):
                if tmp is None:
                    continue
                if tmp.size == 0:
                    raise _err(400, f"the {what} part is empty")
                if tmp.sha256 != declared:
                    raise _err(400, f"{what} sha256 mismatch: the metadata says {declared}, "
                                    f"the {tmp.size} bytes received hash to {tmp.sha256}")
            if blob is not None:
                await run_in_threadpool(_check_blob, blob)
            new = NewCheckpoint(
                member=Member(id=meta.id, role=meta.role, generation=meta.generation,
                              parent=meta.parent, created=meta.created,
                              settings=meta.settings),
                location=meta.location, checkpoint_sha256=ckpt.sha256,
                checkpoint_size=ckpt.size,
                blob_sha256=None if blob is None else blob.sha256,
                blob_size=None if blob is None else blob.size)
            rec, created = await run_in_threadpool(db.add_checkpoint, new, claims.agent_id)
            committed = True
            await run_in_threadpool(_publish_files, parts)
            return JSONResponse(rec, status_code=201 if created else 200)
        finally:
            if not committed:
                parts.discard()

    def _finish_files(parts: _Multipart) -> None:
        for tmp in parts.files.values():
            tmp.finish()

    def _publish_files(parts: _Multipart) -> None:
        for tmp in parts.files.values():
            store.publish(tmp)

    def _check_blob(tmp: TempBlob) -> None:
        raw = tmp.path.read_bytes()
        try:
            kind = blob_kind(raw)
            if kind != "raw":
                raise ValueError(f"it is {kind}-encoded; upload the raw blob (BPW1), the "
                                 "registry serves the encodings")
            parse_bpw(raw)
        except ValueError as e:
            raise _err(400, f"the blob is not a valid raw .bpw: {e}") from None

    @app.get("/checkpoints", summary="List checkpoint records (read)", response_model=list[CheckpointRecord], tags=["checkpoints"],
             responses={**e401})
    def list_checkpoints(
        _c: Annotated[Claims, read],
        role: Annotated[str | None, Query(max_length=64)] = None,
        status: Annotated[Status | None, Query()] = None,
        generation: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
        location: Annotated[str | None, Query(max_length=TEXT_LEN)] = None,
    ) -> JSONResponse:
        """Every checkpoint record matching all the filters given, in registration
        order (``created``, then id)."""
        for name, value in (("role", role), ("location", location)):
            if value is not None:
                try:
                    _text_ok(value)
                except ValueError as e:
                    raise _err(400, f"{name} {e}") from None
        return JSONResponse(db.checkpoints(role=role, status=status, generation=generation,
                                           location=location))

    @app.get("/checkpoints/{checkpoint_id}", summary="One checkpoint record (read)", response_model=CheckpointRecord,
             tags=["checkpoints"], responses={**e400, **e401, **e404})
    def get_checkpoint(checkpoint_id: IdPath, _c: Annotated[Claims, read]) -> JSONResponse:
        """One checkpoint record."""
        return JSONResponse(_record(checkpoint_id))

    @app.get("/checkpoints/{checkpoint_id}/checkpoint", summary="Download the SB3 zip (read)", tags=["checkpoints"],
             response_class=FileResponse,
             responses={200: {"content": {"application/zip": {}}, "description":
                              "the SB3 zip; header X-Content-SHA256"}, **e400, **e401, **e404})
    def download_checkpoint(checkpoint_id: IdPath, _c: Annotated[Claims, read]) -> Response:
        """The checkpoint's SB3 zip, with ``X-Content-SHA256``."""
        rec = _record(checkpoint_id)
        sha = rec["checkpoint_sha256"]
        if not store.has(sha):
            raise _err(503, f"artifact {sha} is missing from the store")
        return FileResponse(store.path(sha), media_type="application/zip",
                            filename=f"{rec['id']}.zip", headers={"X-Content-SHA256": sha})

    @app.get("/checkpoints/{checkpoint_id}/blob", summary="Download the .bpw, LZ4 or raw (read)", tags=["checkpoints"],
             responses={200: {"content": {"application/octet-stream": {}}, "description":
                              "the .bpw: an LZ4 frame of the raw blob (compression=lz4) or "
                              "the raw blob; headers X-Content-SHA256 (of the bytes sent) "
                              "and X-Blob-SHA256 (of the raw blob)"},
                        **e400, **e401, 404: {"model": ErrorModel, "description":
                                              "no such checkpoint, or it has no blob"}})
    def download_blob(checkpoint_id: IdPath, _c: Annotated[Claims, read],
                      compression: Annotated[Literal["lz4", "none"], Query()] = "lz4",
                      ) -> Response:
        """The checkpoint's ``.bpw``: by default an LZ4 frame of the raw blob, which
        brawlkit's loaders (Python and C) read directly."""
        rec = _record(checkpoint_id)
        sha = rec["blob_sha256"]
        if sha is None:
            raise NotFound(f"checkpoint {checkpoint_id!r} has no blob")
        if not store.has(sha):
            raise _err(503, f"artifact {sha} is missing from the store")
        raw = store.read(sha)
        body = compress_lz4(raw) if compression == "lz4" else raw
        return Response(body, media_type="application/octet-stream", headers={
            "X-Content-SHA256": hashlib.sha256(body).hexdigest(), "X-Blob-SHA256": sha,
            "Content-Disposition": f'attachment; filename="{sha[:16]}.bpw"'})

    @app.get("/roles/{role}/newest", summary="Newest non-disabled checkpoint of a role (read)", response_model=CheckpointRecord, tags=["checkpoints"],
             responses={**e400, **e401, 404: {"model": ErrorModel, "description":
                                              "no non-disabled checkpoint of the role"}})
    def newest(role: Annotated[str, Path(max_length=64)],
               _c: Annotated[Claims, read]) -> JSONResponse:
        """The newest non-disabled checkpoint of a role (largest generation, then
        latest ``created``)."""
        if role not in ROLES:
            raise _err(400, f"unknown role {role[:64]!r} (one of {', '.join(ROLES)})")
        rec = db.newest(role)
        if rec is None:
            raise NotFound(f"no checkpoint of role {role!r}")
        return JSONResponse(rec)

    @app.post("/checkpoints/{checkpoint_id}/activate", summary="Make it THE active checkpoint (admin)", response_model=CheckpointRecord,
              tags=["active"], responses={**e400, **e401, **e404, 409: {
                  "model": ErrorModel, "description": "the checkpoint is disabled"}})
    def activate(checkpoint_id: IdPath, _c: Annotated[Claims, admin]) -> JSONResponse:
        """Make this THE active checkpoint (the previous one goes back to
        ``registered``), in one transaction."""
        return JSONResponse(db.activate(_checked_id(checkpoint_id)))

    @app.post("/checkpoints/{checkpoint_id}/disable", summary="Disable a checkpoint (admin)", response_model=CheckpointRecord,
              tags=["active"], responses={**e400, **e401, **e404})
    def disable(checkpoint_id: IdPath, _c: Annotated[Claims, admin]) -> JSONResponse:
        """Mark the checkpoint disabled: kept in the history and the ratings, never
        active or newest again.  Disabling the active one leaves none active."""
        return JSONResponse(db.disable(_checked_id(checkpoint_id)))

    @app.get("/active", summary="The active checkpoint (read)", response_model=CheckpointRecord, tags=["active"],
             responses={**e401, 404: {"model": ErrorModel, "description":
                                      "no checkpoint is active"}})
    def active(_c: Annotated[Claims, read]) -> JSONResponse:
        """The active checkpoint."""
        rec = db.active()
        if rec is None:
            raise NotFound("no checkpoint is active")
        return JSONResponse(rec)

    # ------------------------------------------------------------ matches, ratings
    @app.post("/matches", summary="Store a batch of matches (write)", response_model=MatchBatchResult, tags=["matches"],
              responses={**e400, **e401, 403: {
                  "model": ErrorModel, "description": "the token's scope is too low, or a "
                  "player:NAME record has no valid ticket of NAME (the detail names the "
                  "record)"}, 413: {"model": ErrorModel, "description": "over --max-upload-mb"}})
    def post_matches(
        batch: Annotated[list[MatchIn], Body(max_length=MAX_MATCH_BATCH)],
        claims: Annotated[Claims, write],
    ) -> dict[str, int]:
        """Store a batch of matches (``MatchRecord.to_json()`` dicts), all or nothing.
        A match whose content is stored already is not stored again, so a batch may be
        retried safely.  A record naming ``player:NAME`` carries a valid ticket of
        NAME in ``ticket`` (403 naming the record otherwise; a record stored already
        needs none, so a retry after the ticket expired still succeeds)."""
        recs: list[MatchRecord] = []
        for i, m in enumerate(batch):
            try:
                recs.append(MatchRecord.from_json(m.model_dump(exclude={"ticket"})))
            except ValueError as e:
                raise _err(400, f"match {i}: {e}") from None
        refused: list[tuple[int, str]] = []
        for i, (m, rec) in enumerate(zip(batch, recs, strict=True)):
            tickets = [m.ticket] if isinstance(m.ticket, str) else list(m.ticket or [])
            for side in (rec.a, rec.b):
                name = player_name(side)
                why = "" if name is None else _ticket_problem(name, tickets)
                if why:
                    refused.append((i, f"match {i}: {side!r} needs a valid ticket of player "
                                       f"{name!r}: {why}"))
                    break
        if refused:
            stored = db.stored([recs[i] for i, _ in refused])
            for (_i, why), known in zip(refused, stored, strict=True):
                if not known:
                    raise _err(403, why)
        accepted, duplicates = db.add_matches(recs, claims.agent_id)
        return {"accepted": accepted, "duplicates": duplicates}

    @app.get("/matches", summary="The stored matches in replay order (read)", response_model=list[MatchOut], tags=["matches"], responses={**e401})
    def get_matches(
        _c: Annotated[Claims, read],
        since: Annotated[float | None, Query(allow_inf_nan=False, description=
                                             "only matches with time >= since (epoch s)")] = None,
    ) -> JSONResponse:
        """Every stored match (``time >= since``), in the canonical replay order
        (``MatchRecord.sort_key``)."""
        return JSONResponse([r.to_json() for r in db.matches(since)])

    @app.get("/ratings", summary="Elo and Bradley-Terry over every stored match (read)", response_model=RatingsTable, tags=["matches"], responses={**e401})
    def ratings(
        _c: Annotated[Claims, read],
        k: Annotated[float, Query(ge=0, le=1000, allow_inf_nan=False)] = 32.0,
        initial: Annotated[float, Query(ge=-1e9, le=1e9, allow_inf_nan=False)] = 1200.0,
        bootstrap: Annotated[int, Query(ge=0, le=1000)] = 200,
        seed: Annotated[int, Query(ge=0, le=2**32 - 1)] = 0,
    ) -> JSONResponse:
        """Elo and Bradley–Terry over every stored match, computed by
        ``brawlkit.league.ratings`` on the matches in ``MatchRecord.sort_key`` order with
        the permanent members and every stored checkpoint (registration order) as the
        members: the same table, to the last digit, as ``python -m brawlkit elo --json``
        on a league directory holding the same members and matches."""
        members = permanent_members() + db.members()
        table = league_table(members, db.matches(), k=k, initial=initial,
                             bootstrap=bootstrap, seed=seed)
        return JSONResponse(table)

    base_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """The generated document plus the schema of the upload's ``metadata`` part (a
        JSON string inside the multipart body, so FastAPI cannot see it by itself)."""
        if app.openapi_schema is None:
            spec = base_openapi()
            spec.setdefault("components", {}).setdefault("schemas", {})["CheckpointMetadata"] = \
                CheckpointMetadata.model_json_schema(ref_template="#/components/schemas/{model}")
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


__all__ = ["Registry", "create_app"]
