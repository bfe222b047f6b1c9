"""The registry's HTTP API (FastAPI): checkpoints, matches, ratings, the active checkpoint.

``/openapi.json`` (and ``/docs``) is the reference of every endpoint, request and
response; docs/registry.md summarises them and explains the rules.  This module
assembles the app: the routers (:mod:`~brawlkit.registry.routes`), the body-size
limit (:mod:`~brawlkit.registry.body_limit`), the error answers and the registry the
routes get through :mod:`~brawlkit.registry.deps`.  The HTTP layer is only that: the
rules live in :mod:`~brawlkit.registry.database` (what is stored, in which
transaction), :mod:`~brawlkit.registry.store` (the artifacts) and
:mod:`~brawlkit.registry.auth` (who may do what).

Every answer to bad client input is a 4xx with a ``detail`` message: 400 malformed,
401 no/bad/expired token (with ``WWW-Authenticate: Bearer``) or player key, 403 scope
too low or a player's match without a valid ticket,
404 unknown id, 409 conflict, 413 too large, 415 not multipart, 422 invalid fields.
"""

from __future__ import annotations

from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from brawlkit.registry.body_limit import BodyLimit
from brawlkit.registry.database import Conflict, Invalid, NotFound
from brawlkit.registry.deps import Registry
from brawlkit.registry.routes import ROUTERS
from brawlkit.registry.schemas import API_VERSION, CheckpointMetadata


async def _not_found(_req: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=404)


async def _conflict(_req: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=409)


async def _unknown_reference(_req: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=422)


async def _invalid(_req: Request, exc: Exception) -> JSONResponse:
    # FastAPI's own handler echoes each bad input back, which cannot be rendered
    # when it is NaN (a 500) and may be megabytes: name the field and the problem only
    errors = [{"type": str(e.get("type", "")), "msg": str(e.get("msg", "")),
               "loc": [p if isinstance(p, int) else str(p)[:100] for p in e.get("loc", ())]}
              for e in cast(RequestValidationError, exc).errors()[:50]]
    return JSONResponse({"detail": errors}, status_code=422)


def create_app(reg: Registry) -> FastAPI:
    """The FastAPI application of one registry (``reg``: database, store, signer)."""
    app = FastAPI(
        title="brawlkit checkpoint registry",
        version=API_VERSION,
        description="Checkpoints, matches and ratings shared by BRAWLPIT leagues. "
        "Authenticate with POST /auth/token, then send `Authorization: Bearer <token>`. "
        "Scopes: read < write < admin. docs/registry.md explains the rules.",
    )
    app.state.registry = reg  # what deps.get_registry hands the routes
    app.add_middleware(BodyLimit, limit=reg.max_upload_bytes)
    app.add_exception_handler(NotFound, _not_found)
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(Conflict, _conflict)
    app.add_exception_handler(Invalid, _unknown_reference)
    for router in ROUTERS:
        app.include_router(router)
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
