"""``POST /auth/token``: an agent trades its secret for a short-lived bearer token
(the one :mod:`brawlkit.registry.deps` checks on every other route);
``POST /agents/{agent_id}/revoke``: an admin kills an agent's secret and tokens."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from brawlkit.league.records import id_problem
from brawlkit.registry.auth import verify_secret
from brawlkit.registry.deps import REALM, Admin, AnonLimit, RegistryDep, http_error
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.schemas import (
    E400,
    E401,
    E429,
    AgentRevoked,
    ErrorModel,
    TokenRequest,
    TokenResponse,
)

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where


@router.post("/auth/token", summary="Trade an agent's secret for a bearer token",
             response_model=TokenResponse, tags=["auth"],
             dependencies=[AnonLimit],
             responses={401: {"model": ErrorModel, "description":
                              "unknown or revoked agent, or wrong secret"}, **E429})
def token(req: TokenRequest, reg: RegistryDep) -> dict[str, Any]:
    """Trade an agent's id and secret for a short-lived bearer token."""
    found = None if id_problem(req.agent_id) else reg.db.agent(req.agent_id)
    ok = verify_secret(req.secret, None if found is None else found[0])
    if not ok or found is None:
        raise http_error(401, "unknown agent or wrong secret", {"WWW-Authenticate": REALM})
    scope = found[1]
    return {"access_token": reg.signer.issue(req.agent_id, scope, reg.token_ttl),
            "token_type": "bearer", "expires_in": reg.token_ttl, "scope": scope}


@router.post("/agents/{agent_id}/revoke", summary="Revoke an agent (admin)",
             response_model=AgentRevoked, tags=["auth"],
             responses={**E400, **E401, 404: {"model": ErrorModel,
                                               "description": "no such agent"}})
def revoke(agent_id: Annotated[str, Path(max_length=1000)], _c: Admin,
           reg: RegistryDep) -> dict[str, Any]:
    """Revoke an agent: its secret no longer buys a token, and every token it holds is
    refused from the next request on (each request checks the agent).  Idempotent;
    an agent cannot be un-revoked (make a new one)."""
    why = id_problem(agent_id, "agent name")
    if why:
        raise http_error(400, why)
    return reg.db.revoke_agent(agent_id)
