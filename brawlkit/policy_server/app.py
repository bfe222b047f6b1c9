"""The ``/move`` policy endpoint: a FastAPI app around any chooser of moves.

Routes (docs/move.md):

* ``POST /move`` — body :class:`~brawlkit.policy_server.policy.MoveRequest`; reply
  ``{"move": NAME, "logprob": float}``, plus ``tokens``, ``token_logprobs``, ``prompt``
  and ``response`` from a chooser that generates text (its ``answer(request)``: the
  text policy, the language-model adapter), which the rollout workers keep.  A body that does not validate gets 422
  with ``detail`` (pydantic's list) and ``message``, one line naming every bad
  field (``self.x: Field required``).
* ``GET /moves`` — the declared moves (:data:`brawlkit.policy_server.moves.MOVES`).
* ``GET /info`` — what the worker may adopt: the model's label, its decision period
  in ticks, and the league member it plays as (or null).

``python -m brawlkit policy serve`` runs it for a PPO checkpoint; the app itself
takes any object with ``choose(request) -> (name, logprob)``, so tests and other
models reuse it.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from brawlkit.policy_server.moves import HISTORY, MOVES, NO_MOVE
from brawlkit.policy_server.policy import MoveRequest


class Chooser(Protocol):
    """Anything that picks a move; one that also has ``answer(req) -> dict`` (the reply
    with its extra keys) is asked through that instead."""

    label: str
    decision_ticks: int

    def choose(self, req: MoveRequest) -> tuple[str, float]: ...


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "self", "x")`` -> ``self.x``; list indices as ``[i]``."""
    out = ""
    for part in loc[1:] if loc and loc[0] == "body" else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def validation_message(errors: list[dict[str, Any]]) -> str:
    """One line naming every bad field and why."""
    return "; ".join(f"{_field(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors)


def create_app(chooser: Chooser, member: str | None = None) -> Any:
    """The FastAPI app serving ``chooser``; ``member`` = the league id it plays as."""
    from fastapi import FastAPI, Request
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    app = FastAPI(title="brawlkit /move", version="1",
                  description="Named BRAWLPIT moves for a game state (docs/move.md).")

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        body = {"detail": jsonable_encoder(errors, custom_encoder={Exception: str}),
                "message": validation_message(errors)}
        return JSONResponse(status_code=422, content=body)

    answer = getattr(chooser, "answer", None)

    def reply(req: MoveRequest) -> dict[str, Any]:
        if answer is not None:
            out = dict(answer(req))
        else:
            name, logprob = chooser.choose(req)
            out = {"move": name, "logprob": logprob}
        lp = out.get("logprob")
        if isinstance(lp, float) and not math.isfinite(lp):
            out["logprob"] = -1e9  # JSON has no -inf; "impossible" reads as a huge negative
        return out

    if getattr(chooser, "blocking", False):
        # a chooser that waits on I/O (a language model's server): a plain def runs in
        # FastAPI's thread pool, so one slow answer does not stall the other workers
        @app.post("/move")
        def post_move_blocking(req: MoveRequest) -> dict[str, Any]:
            return reply(req)
    else:
        @app.post("/move")
        async def post_move(req: MoveRequest) -> dict[str, Any]:
            return reply(req)  # compute-only and fast: no thread hop

    @app.get("/moves")
    async def get_moves() -> dict[str, Any]:
        return {"moves": [m.to_json() for m in MOVES], "no_move": NO_MOVE, "history": HISTORY}

    @app.get("/info")
    async def get_info() -> dict[str, Any]:
        return {"model": chooser.label, "decision_ticks": chooser.decision_ticks, "member": member}

    return app
