"""THE active checkpoint (the one bots play): make one active, disable one, read it.

Switching is one transaction in the database (:meth:`RegistryDB.activate`), so two
admins activating at once leave exactly one active.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from brawlkit.registry.database import NotFound
from brawlkit.registry.deps import Admin, Read, RegistryDep, checked_id
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.schemas import E400, E401, E404, CheckpointRecord, ErrorModel, IdPath

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where


@router.post("/checkpoints/{checkpoint_id}/activate",
             summary="Make it THE active checkpoint (admin)", response_model=CheckpointRecord,
             tags=["active"], responses={**E400, **E401, **E404, 409: {
                 "model": ErrorModel, "description": "the checkpoint is disabled"}})
def activate(checkpoint_id: IdPath, _c: Admin, reg: RegistryDep) -> JSONResponse:
    """Make this THE active checkpoint (the previous one goes back to
    ``registered``), in one transaction."""
    return JSONResponse(reg.db.activate(checked_id(checkpoint_id)))


@router.post("/checkpoints/{checkpoint_id}/disable", summary="Disable a checkpoint (admin)",
             response_model=CheckpointRecord, tags=["active"],
             responses={**E400, **E401, **E404})
def disable(checkpoint_id: IdPath, _c: Admin, reg: RegistryDep) -> JSONResponse:
    """Mark the checkpoint disabled: kept in the history and the ratings, never
    active or newest again.  Disabling the active one leaves none active."""
    return JSONResponse(reg.db.disable(checked_id(checkpoint_id)))


@router.get("/active", summary="The active checkpoint (read)", response_model=CheckpointRecord,
            tags=["active"],
            responses={**E401, 404: {"model": ErrorModel, "description":
                                     "no checkpoint is active"}})
def active(_c: Read, reg: RegistryDep) -> JSONResponse:
    """The active checkpoint."""
    rec = reg.db.active()
    if rec is None:
        raise NotFound("no checkpoint is active")
    return JSONResponse(rec)
