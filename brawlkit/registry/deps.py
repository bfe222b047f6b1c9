"""What the registry's routes depend on: the running :class:`Registry` (kept in the
app's state by :func:`~brawlkit.registry.service.create_app`), the bearer-token
check of each scope, and the helpers several routers share.

A route asks for what it needs in its signature (``reg: RegistryDep``,
``_c: Read``), so FastAPI both runs the check and documents it (the ``HTTPBearer``
security scheme of every operation that takes a token).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, cast

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from brawlkit.registry.auth import TICKET_TTL_S, AuthError, Claims, TokenSigner, scope_allows
from brawlkit.registry.database import NotFound, RegistryDB, plain_name_problem
from brawlkit.registry.store import Store

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


async def get_registry(request: Request) -> Registry:
    """The registry of the app serving ``request`` (``app.state.registry``).  Async, so
    FastAPI calls it in the event loop rather than in a worker thread."""
    return cast(Registry, request.app.state.registry)


RegistryDep = Annotated[Registry, Depends(get_registry)]

bearer = HTTPBearer(auto_error=False, description="a token from POST /auth/token")


def http_error(status: int, detail: str, headers: dict[str, str] | None = None) -> HTTPException:
    """The 4xx answer ``{"detail": detail}`` (raise it)."""
    return HTTPException(status_code=status, detail=detail, headers=headers)


def require(scope: str) -> Callable[..., Claims]:
    """The dependency that admits a bearer token allowing ``scope``: its claims, or 401
    (no, bad or expired token, with ``WWW-Authenticate``) or 403 (scope too low)."""

    def check(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
              reg: RegistryDep) -> Claims:
        if creds is None:
            raise http_error(401, "a bearer token is needed (POST /auth/token)",
                             {"WWW-Authenticate": REALM})
        try:
            claims = reg.signer.verify(creds.credentials)
        except AuthError as e:
            raise http_error(401, str(e), {"WWW-Authenticate":
                                           f'{REALM}, error="invalid_token"'}) from None
        if not scope_allows(claims.scope, scope):
            raise http_error(403, f"agent {claims.agent_id!r} has scope {claims.scope!r}; "
                                  f"this needs {scope!r}")
        return claims

    return check


Read = Annotated[Claims, Depends(require("read"))]
Write = Annotated[Claims, Depends(require("write"))]
Admin = Annotated[Claims, Depends(require("admin"))]


def checked_id(checkpoint_id: str) -> str:
    """A path id that is not a plain name is refused before it reaches anything."""
    why = plain_name_problem(checkpoint_id, "checkpoint id")
    if why:
        raise http_error(400, why)
    return checkpoint_id


def checkpoint_record(db: RegistryDB, checkpoint_id: str) -> dict[str, Any]:
    """The stored record of ``checkpoint_id``: 400 for an id that is no plain name, 404
    for an unknown one."""
    rec = db.checkpoint(checked_id(checkpoint_id))
    if rec is None:
        raise NotFound(f"no checkpoint {checkpoint_id!r}")
    return rec
