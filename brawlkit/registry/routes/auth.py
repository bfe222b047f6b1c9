"""``POST /auth/token``: an agent trades its secret for a short-lived bearer token
(the one :mod:`brawlkit.registry.deps` checks on every other route)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from brawlkit.registry.auth import verify_secret
from brawlkit.registry.database import plain_name_problem
from brawlkit.registry.deps import REALM, RegistryDep, http_error
from brawlkit.registry.schemas import ErrorModel, TokenRequest, TokenResponse

router = APIRouter()


@router.post("/auth/token", summary="Trade an agent's secret for a bearer token",
             response_model=TokenResponse, tags=["auth"],
             responses={401: {"model": ErrorModel,
                              "description": "unknown agent or wrong secret"}})
def token(req: TokenRequest, reg: RegistryDep) -> dict[str, Any]:
    """Trade an agent's id and secret for a short-lived bearer token."""
    found = None if plain_name_problem(req.agent_id) else reg.db.agent(req.agent_id)
    ok = verify_secret(req.secret, None if found is None else found[0])
    if not ok or found is None:
        raise http_error(401, "unknown agent or wrong secret", {"WWW-Authenticate": REALM})
    scope = found[1]
    return {"access_token": reg.signer.issue(req.agent_id, scope, reg.token_ttl),
            "token_type": "bearer", "expires_in": reg.token_ttl, "scope": scope}
