"""The match log and the ratings computed from it: ``POST /matches`` (a batch, all
or nothing, retry-safe), ``GET /matches`` (replay order), ``GET /ratings`` (the
league's own Elo and Bradley–Terry table over every stored match)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse, Response

from brawlkit.league.records import MatchRecord, player_name
from brawlkit.registry.auth import TokenSigner
from brawlkit.registry.deps import Read, RegistryDep, Write, http_error
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.routes.players import ticket_problem
from brawlkit.registry.schemas import (
    E400,
    E401,
    ErrorModel,
    MatchBatchResult,
    MatchIn,
    MatchOut,
    RatingsTable,
)

MAX_MATCH_BATCH = 100_000

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where


@router.post("/matches", summary="Store a batch of matches (write)",
             response_model=MatchBatchResult, tags=["matches"],
             responses={**E400, **E401, 403: {
                 "model": ErrorModel, "description": "the token's scope is too low, or a "
                 "player:NAME record has no valid ticket of NAME (the detail names the "
                 "record)"}, 413: {"model": ErrorModel, "description": "over --max-upload-mb"}})
def post_matches(
    batch: Annotated[list[MatchIn], Body(max_length=MAX_MATCH_BATCH)],
    claims: Write,
    reg: RegistryDep,
) -> dict[str, int]:
    """Store a batch of matches (``MatchRecord.to_json()`` dicts), all or nothing.
    A match whose content is stored already is not stored again, so a batch may be
    retried safely.  A record naming ``player:NAME`` carries a valid ticket of
    NAME in ``ticket`` (403 naming the record otherwise; a record stored already
    needs none, so a retry after the ticket expired still succeeds)."""
    recs = _match_records(batch)
    refused = _without_ticket(reg.signer, batch, recs)
    if refused:
        stored = reg.db.stored([recs[i] for i, _ in refused])
        for (_i, why), known in zip(refused, stored, strict=True):
            if not known:
                raise http_error(403, why)
    accepted, duplicates = reg.db.add_matches(recs, claims.agent_id)
    return {"accepted": accepted, "duplicates": duplicates}


def _match_records(batch: list[MatchIn]) -> list[MatchRecord]:
    """The league's records of the batch (its own rules; 400 naming the first bad one)."""
    recs: list[MatchRecord] = []
    for i, m in enumerate(batch):
        try:
            recs.append(MatchRecord.from_json(m.model_dump(exclude={"ticket"}, exclude_none=True)))
        except ValueError as e:
            raise http_error(400, f"match {i}: {e}") from None
    return recs


def _without_ticket(signer: TokenSigner, batch: list[MatchIn],
                    recs: list[MatchRecord]) -> list[tuple[int, str]]:
    """``(index, why)`` of every record naming a player none of its tickets proves."""
    refused: list[tuple[int, str]] = []
    for i, (m, rec) in enumerate(zip(batch, recs, strict=True)):
        tickets = [m.ticket] if isinstance(m.ticket, str) else list(m.ticket or [])
        for side in (rec.a, rec.b):
            name = player_name(side)
            why = "" if name is None else ticket_problem(signer, name, tickets)
            if why:
                refused.append((i, f"match {i}: {side!r} needs a valid ticket of player "
                                   f"{name!r}: {why}"))
                break
    return refused


@router.get("/matches", summary="The stored matches in replay order (read)",
            response_model=list[MatchOut], tags=["matches"], responses={**E401})
def get_matches(
    _c: Read,
    reg: RegistryDep,
    since: Annotated[float | None, Query(allow_inf_nan=False, description=
                                         "only matches with time >= since (epoch s)")] = None,
) -> JSONResponse:
    """Every stored match (``time >= since``), in the canonical replay order
    (``MatchRecord.sort_key``)."""
    return JSONResponse([r.to_json() for r in reg.db.matches(since)])


@router.get("/ratings", summary="Elo and Bradley-Terry over every stored match (read)",
            response_model=RatingsTable, tags=["matches"], responses={**E401})
async def ratings(
    claims: Read,
    reg: RegistryDep,
    k: Annotated[float, Query(ge=0, le=1000, allow_inf_nan=False)] = 32.0,
    initial: Annotated[float, Query(ge=-1e9, le=1e9, allow_inf_nan=False)] = 1200.0,
    bootstrap: Annotated[int, Query(ge=0, le=1000, description=
                                    "resamples; a read-scoped agent gets at most the "
                                    "service's --read-bootstrap-max (the table says how "
                                    "many it used)")] = 200,
    seed: Annotated[int, Query(ge=0, le=2**32 - 1)] = 0,
) -> Response:
    """Elo and Bradley–Terry over every stored match, computed by
    ``brawlkit.league.ratings`` on the matches in ``MatchRecord.sort_key`` order with
    the permanent members and every stored checkpoint (registration order) as the
    members: the same table, to the last digit, as ``python -m brawlkit elo --json``
    on a league directory holding the same members and matches (with the same
    ``bootstrap``).  Computed once per state of the match log and settings, then
    served from a cache (header ``X-Ratings-Cache``: ``hit`` or ``computed``); a
    read-scoped agent's ``bootstrap`` is capped."""
    if claims.scope == "read":
        bootstrap = min(bootstrap, reg.read_bootstrap_max)
    body, hit = await reg.ratings.table(reg.db, k=k, initial=initial, bootstrap=bootstrap, seed=seed)
    return Response(body, media_type="application/json",
                    headers={"X-Ratings-Cache": "hit" if hit else "computed"})
