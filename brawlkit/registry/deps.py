"""What the registry's routes depend on: the running :class:`Registry` (kept in the
app's state by :func:`~brawlkit.registry.service.create_app`), the bearer-token
check of each scope, and the helpers several routers share.

A route asks for what it needs in its signature (``reg: RegistryDep``,
``_c: Read``), so FastAPI both runs the check and documents it (the ``HTTPBearer``
security scheme of every operation that takes a token).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, cast

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from brawlkit.league.records import id_problem
from brawlkit.registry.auth import TICKET_TTL_S, AuthError, Claims, TokenSigner, scope_allows
from brawlkit.registry.database import NotFound, RegistryDB
from brawlkit.registry.limits import ANON_BURST, ANON_RATE, READ_BOOTSTRAP_MAX, RateLimiter
from brawlkit.registry.ratings_cache import RatingsCache
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
    agent_limit: RateLimiter = field(default_factory=RateLimiter.per_agent)
    anon_limit: RateLimiter = field(default_factory=lambda: RateLimiter(ANON_RATE, ANON_BURST))
    read_bootstrap_max: int = READ_BOOTSTRAP_MAX
    ratings: RatingsCache = field(default_factory=RatingsCache)
    #: the league page's Elo-drift chart per state of the log (routes/page.py)
    page_charts: dict[Any, str] = field(default_factory=dict)


async def get_registry(request: Request) -> Registry:
    """The registry of the app serving ``request`` (``app.state.registry``).  Async, so
    FastAPI calls it in the event loop rather than in a worker thread."""
    return cast(Registry, request.app.state.registry)


RegistryDep = Annotated[Registry, Depends(get_registry)]

bearer = HTTPBearer(auto_error=False, description="a token from POST /auth/token")


def http_error(status: int, detail: str, headers: dict[str, str] | None = None) -> HTTPException:
    """The 4xx answer ``{"detail": detail}`` (raise it)."""
    return HTTPException(status_code=status, detail=detail, headers=headers)


def rate_limited(limiter: RateLimiter, key: str, kind: str, who: str) -> None:
    """429 with ``Retry-After`` when ``key`` is over its rate (counted by ``kind``)."""
    wait = limiter.retry_after(key, kind)
    if wait:
        raise http_error(429, f"too many requests from {who}: retry in {wait} s",
                         {"Retry-After": str(wait)})


def client_limit(request: Request) -> None:
    """The rate limit of the routes without a token, per client address."""
    reg = cast(Registry, request.app.state.registry)
    host = request.client.host if request.client else "?"
    rate_limited(reg.anon_limit, host, "address", f"address {host}")


AnonLimit = Depends(client_limit)


def require(scope: str) -> Callable[..., Claims]:
    """The dependency that admits a bearer token allowing ``scope``: its claims, or 401
    (no, bad or expired token, with ``WWW-Authenticate``; or the token of an agent
    revoked since — looked up on every request, one primary-key read), 403 (scope
    too low) or 429 (the agent is over its request rate)."""

    def check(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
              reg: RegistryDep) -> Claims:
        return token_claims(reg, None if creds is None else creds.credentials, scope)

    return check


def token_claims(reg: Registry, token: str | None, scope: str) -> Claims:
    """The claims of bearer ``token`` if it allows ``scope`` — the one check behind every
    route that takes a token, whether it came in an ``Authorization`` header or (the
    league page) a cookie; 401 / 403 / 429 as :func:`require` says."""
    invalid = {"WWW-Authenticate": f'{REALM}, error="invalid_token"'}
    if token is None:
        raise http_error(401, "a bearer token is needed (POST /auth/token)",
                         {"WWW-Authenticate": REALM})
    try:
        claims = reg.signer.verify(token)
    except AuthError as e:
        raise http_error(401, str(e), invalid) from None
    rate_limited(reg.agent_limit, claims.agent_id, "agent", f"agent {claims.agent_id!r}")
    if reg.db.agent_scope(claims.agent_id) is None:
        raise http_error(401, f"agent {claims.agent_id!r} is revoked (or unknown to this "
                              "registry's database)", invalid)
    if not scope_allows(claims.scope, scope):
        raise http_error(403, f"agent {claims.agent_id!r} has scope {claims.scope!r}; "
                              f"this needs {scope!r}")
    return claims


Read = Annotated[Claims, Depends(require("read"))]
Write = Annotated[Claims, Depends(require("write"))]
Admin = Annotated[Claims, Depends(require("admin"))]


def checked_id(checkpoint_id: str) -> str:
    """A path id that is not a plain name is refused before it reaches anything."""
    why = id_problem(checkpoint_id, "checkpoint id")
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
