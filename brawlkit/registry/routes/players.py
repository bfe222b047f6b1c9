"""Human players: sign up (``POST /players``), trade the key for a ticket
(``POST /players/{name}/ticket``), list them (``GET /players``).

A player has no token: its key (shown once) buys a short-lived signed ticket, which
the bot that played the person sends with the match (``POST /matches`` checks it
with :func:`ticket_problem`), so a match against ``player:NAME`` is stored only
with that person's consent.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path
from fastapi.responses import JSONResponse

from brawlkit.league.records import player_name_problem
from brawlkit.registry.auth import AuthError, TokenSigner, hash_secret, new_secret, verify_secret
from brawlkit.registry.deps import AnonLimit, Read, RegistryDep, http_error
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.schemas import (
    E401,
    E429,
    ErrorModel,
    PlayerCreated,
    PlayerIn,
    PlayerRecord,
    TicketResponse,
)

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where


@router.post("/players", summary="Sign up a human player (no token)", status_code=201,
             response_model=PlayerCreated, tags=["players"], dependencies=[AnonLimit],
             responses={409: {"model": ErrorModel, "description": "the name is taken"},
                        422: {"model": ErrorModel, "description": "not a valid name"},
                        **E429})
def add_player(req: PlayerIn, reg: RegistryDep) -> JSONResponse:
    """Create a player; its key is in the answer, once (only a salted scrypt hash
    is stored).  Its matches are ``player:NAME`` in the match log."""
    key = new_secret()
    reg.db.add_player(req.name, hash_secret(key))
    return JSONResponse({"name": req.name, "key": key}, status_code=201)


@router.post("/players/{name}/ticket", summary="Trade a player's key for a ticket",
             response_model=TicketResponse, tags=["players"], dependencies=[AnonLimit],
             responses={401: {"model": ErrorModel, "description":
                              "no key, unknown player or wrong key"}, **E429})
def player_ticket(
    reg: RegistryDep,
    name: Annotated[str, Path(max_length=1000)],
    x_player_key: Annotated[str | None, Header(alias="X-Player-Key", max_length=256)] = None,
) -> dict[str, Any]:
    """A signed ticket naming the player, valid ``--ticket-ttl`` seconds: a bot
    that played this person posts it with the match (POST /matches)."""
    if not x_player_key:
        raise http_error(401, "the player's key is needed (header X-Player-Key)")
    found = None if player_name_problem(name) else reg.db.player(name)
    if not verify_secret(x_player_key, found) or found is None:
        raise http_error(401, "unknown player or wrong key")
    ticket = reg.signer.issue_ticket(name, reg.ticket_ttl)
    return {"ticket": ticket, "expires": reg.signer.verify_ticket(ticket).expires}


@router.get("/players", summary="The players' names (read)", response_model=list[PlayerRecord],
            tags=["players"], responses={**E401})
def list_players(_c: Read, reg: RegistryDep) -> JSONResponse:
    """Every player's name and sign-up time, by name (never a key)."""
    return JSONResponse(reg.db.players())


def ticket_problem(signer: TokenSigner, name: str, tickets: list[str]) -> str:
    """Why none of ``tickets`` proves player ``name`` ('' when one does)."""
    if not tickets:
        return "the record carries no ticket"
    why = []
    for t in tickets:
        try:
            got = signer.verify_ticket(t)
        except AuthError as e:
            why.append(str(e))
            continue
        if got.name == name:
            return ""
        why.append(f"the ticket is player {got.name!r}'s")
    return "; ".join(why)
