"""``GET /league``: the league on a web page, for whoever may read the registry.

Same rule as every read endpoint — a token of any scope — but a browser does not
send ``Authorization`` headers by itself, so the page takes the token three ways:

* a **sign-in form** (``POST /league/login``, an agent's name and secret, exactly
  what ``POST /auth/token`` takes and rate-limited like it): the token it buys is
  kept in an HttpOnly, ``SameSite=Strict`` cookie scoped to ``/league`` (no script
  can read it, no other site's page can send it, and the API endpoints never look at
  it: a cookie reaches read routes only, so there is nothing to forge a write with);
* ``/league?token=T`` with a token from ``POST /auth/token`` — what a script prints
  as a link: set as that cookie, then a redirect to ``/league`` so the token leaves
  the address bar and the history;
* an ``Authorization: Bearer`` header (curl, a proxy that adds it).

The cookie lasts as long as the token (``--token-ttl``); after that the form shows
again.  The routes are not in ``/openapi.json``: they serve HTML to people, the API
reference stays the API's.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from brawlkit.export.bpw import compress_lz4
from brawlkit.league.records import ANONYMOUS_ID, id_problem
from brawlkit.registry.auth import Claims, verify_secret
from brawlkit.registry.database import NotFound
from brawlkit.registry.deps import AnonLimit, Registry, RegistryDep, checkpoint_record, token_claims
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.league_page import (
    CHART_MEMBERS,
    _colour,
    drift_series,
    drift_svg,
    login_page,
    render_page,
)

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where
COOKIE = "brawlkit_league_token"
COOKIE_PATH = "/league"
#: the page's ratings are GET /ratings with its defaults (a read agent's bootstrap capped)
K, INITIAL, BOOTSTRAP, SEED = 32.0, 1200.0, 200, 0
#: charts kept (one per state of the log)
CHARTS_KEPT = 4


def _token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip() or None
    return request.cookies.get(COOKIE)


def _html(body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(body, status_code=status, headers={
        "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                                   "img-src 'self'; form-action 'self'; frame-ancestors 'none'"})


async def _claims(request: Request, reg: Registry) -> Claims | HTMLResponse:
    """The reader's claims, or the page to show instead (the form for 401)."""
    token = _token(request)
    try:
        return await run_in_threadpool(token_claims, reg, token, "read")
    except HTTPException as e:
        if e.status_code == 401:
            msg = "" if token is None else f"Sign in again: {e.detail}."
            resp = _html(login_page(msg), 401)
            if token is not None:
                resp.delete_cookie(COOKIE, path=COOKIE_PATH)
            return resp
        return _html(f"<!doctype html><title>{e.status_code}</title><p>{e.detail}</p>",
                     e.status_code)


def _set_cookie(resp: Response, request: Request, token: str, ttl: int) -> None:
    resp.set_cookie(COOKIE, token, max_age=ttl, path=COOKIE_PATH, httponly=True,
                    samesite="strict", secure=request.url.scheme == "https")


def _chart(reg: Registry, table: dict[str, Any], state: Any) -> str:
    """The Elo-drift SVG of this state of the log (computed once per state: it replays
    the whole log with history)."""
    key = (state, tuple(r["id"] for r in table["members"]))
    if key in reg.page_charts:
        return reg.page_charts[key]
    matches = reg.ratings.log.current(reg.db)
    rows = [r for r in table["members"] if r["games"] and r["id"] != ANONYMOUS_ID]
    shown = sorted(rows, key=lambda r: -r["games"])[:CHART_MEMBERS]
    ids = [str(r["id"]) for r in table["members"]]
    anchor = table.get("anchor")
    series = drift_series(matches, ids, K, INITIAL, keep={str(r["id"]) for r in shown},
                          anchor=None if anchor is None else (anchor["id"], anchor["rating"]))
    svg = drift_svg(series, {str(r["id"]): _colour(r) for r in shown}, len(matches))
    reg.page_charts[key] = svg
    while len(reg.page_charts) > CHARTS_KEPT:
        reg.page_charts.pop(next(iter(reg.page_charts)))
    return svg


def _page_data(reg: Registry, table: dict[str, Any]) -> tuple[Any, ...]:
    state = reg.db.ratings_state()
    records = reg.db.checkpoints()
    active = reg.db.active()
    matches = reg.ratings.log.current(reg.db)
    return records, active, matches, _chart(reg, table, state)


async def _table(request: Request, reg: Registry) -> dict[str, Any] | Response:
    got = await _claims(request, reg)
    if isinstance(got, Response):
        return got
    bootstrap = min(BOOTSTRAP, reg.read_bootstrap_max) if got.scope == "read" else BOOTSTRAP
    body, _hit = await reg.ratings.table(reg.db, k=K, initial=INITIAL, bootstrap=bootstrap,
                                         seed=SEED)
    return {"claims": got, "table": json.loads(body), "body": body}


@router.get("/league/ratings.json", include_in_schema=False)
async def league_ratings(request: Request, reg: RegistryDep) -> Response:
    """The page's "ratings JSON" link: exactly ``GET /ratings`` with the page's settings,
    for a reader signed in by the page's cookie (which is scoped to ``/league`` and never
    reaches the API's own routes)."""
    got = await _table(request, reg)
    if isinstance(got, Response):
        return got
    return Response(got["body"], media_type="application/json",
                    headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})


@router.get("/league", include_in_schema=False)
async def league_page(request: Request, reg: RegistryDep,
                      token: Annotated[str | None, Query(max_length=2048)] = None) -> Response:
    """The page (or the sign-in form); ``?token=`` becomes the cookie, then a redirect."""
    if token is not None:
        try:
            claims = await run_in_threadpool(token_claims, reg, token, "read")
        except HTTPException as e:
            return _html(login_page(f"That link's token is refused: {e.detail}."), e.status_code)
        resp = RedirectResponse("/league", status_code=303)
        _set_cookie(resp, request, token, max(1, claims.expires - int(time.time())))
        return resp
    got = await _table(request, reg)
    if isinstance(got, Response):
        return got
    table = got["table"]
    records, active, matches, chart = await run_in_threadpool(_page_data, reg, table)
    return _html(render_page(table, records, matches, active, got["claims"].agent_id, chart))


@router.post("/league/login", include_in_schema=False, dependencies=[AnonLimit])
def league_login(request: Request, reg: RegistryDep,
                 agent_id: Annotated[str, Form(max_length=200)],
                 secret: Annotated[str, Form(max_length=1000)]) -> Response:
    """Trade an agent's name and secret (as ``POST /auth/token`` does) for the cookie."""
    found = None if id_problem(agent_id) else reg.db.agent(agent_id)
    ok = verify_secret(secret, None if found is None else found[0])
    if not ok or found is None:
        return _html(login_page("Unknown agent or wrong secret."), 401)
    resp = RedirectResponse("/league", status_code=303)
    _set_cookie(resp, request, reg.signer.issue(agent_id, found[1], reg.token_ttl),
                reg.token_ttl)
    return resp


@router.post("/league/logout", include_in_schema=False)
def league_logout() -> Response:
    resp = RedirectResponse("/league", status_code=303)
    resp.delete_cookie(COOKIE, path=COOKIE_PATH)
    return resp


@router.get("/league/blob/{checkpoint_id}", include_in_schema=False)
async def league_blob(checkpoint_id: str, request: Request, reg: RegistryDep,
                      compression: Annotated[Literal["none", "lz4"], Query()] = "none",
                      ) -> Response:
    """A member's ``.bpw`` for the page's download links: the raw blob by default
    (what ``brawlpit_bot --weights`` and the Python loader read; they read the LZ4
    frame of ``compression=lz4`` too), named ``<id>.bpw``."""
    got = await _claims(request, reg)
    if isinstance(got, Response):
        return got
    try:
        rec = await run_in_threadpool(checkpoint_record, reg.db, checkpoint_id)
    except HTTPException as e:
        return _html(f"<!doctype html><title>{e.status_code}</title><p>{e.detail}</p>",
                     e.status_code)
    except NotFound as e:
        return _html(f"<!doctype html><title>404</title><p>{e}</p>", 404)
    sha = rec.get("blob_sha256")
    if not sha or not reg.store.has(sha):
        return _html(f"<!doctype html><title>404</title><p>{checkpoint_id} has no blob</p>", 404)
    raw = await run_in_threadpool(reg.store.read, sha)
    data = compress_lz4(raw) if compression == "lz4" else raw
    return Response(data, media_type="application/octet-stream", headers={
        "Content-Disposition": f'attachment; filename="{rec["id"]}.bpw'
                               f'{".lz4" if compression == "lz4" else ""}"',
        "X-Blob-SHA256": sha, "Cache-Control": "no-store"})

