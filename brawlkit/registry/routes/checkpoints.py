"""Checkpoints: upload one (``POST /checkpoints``), list and read the records,
download the SB3 zip and the ``.bpw``, the newest of a role.

The upload is all or nothing: the body streams into temp files of the store
(:mod:`brawlkit.registry.multipart_upload`), the sha256 of every file is checked
against the metadata, the files are fsynced, the record is committed, and only then
are the files linked into place; any failure before the commit (a bad hash, a
cut-off body, a conflicting id) deletes the temp files, so neither a record nor a
file is left behind.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from brawlkit.export.bpw import blob_kind, compress_lz4, parse_bpw
from brawlkit.league.records import Member, permanent_ids
from brawlkit.league.role_specs import role_names
from brawlkit.registry import json_numbers
from brawlkit.registry.database import TEXT_LEN, NewCheckpoint, NotFound
from brawlkit.registry.deps import Read, RegistryDep, Write, checkpoint_record, http_error
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.multipart_upload import MultipartUpload, boundary_of
from brawlkit.registry.schemas import (
    E400,
    E401,
    E404,
    CheckpointMetadata,
    CheckpointRecord,
    ErrorModel,
    IdPath,
    Status,
    text_ok,
)
from brawlkit.registry.store import TempBlob

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where

#: the upload's body as OpenAPI shows it (FastAPI sees no body parameter: the route
#: reads the stream itself)
UPLOAD_BODY = {
    "required": True,
    "content": {"multipart/form-data": {
        "schema": {
            "type": "object",
            "required": ["metadata", "checkpoint"],
            "properties": {
                "metadata": {"type": "string", "description":
                             "JSON: a Member record (id, role, generation, parent, created, "
                             "settings) plus location, checkpoint_sha256 and optional "
                             "blob_sha256 (see the CheckpointMetadata schema)"},
                "checkpoint": {"type": "string", "format": "binary",
                               "description": "the SB3 checkpoint zip"},
                "blob": {"type": "string", "format": "binary",
                         "description": "the raw .bpw (optional)"},
            },
        },
        "encoding": {"metadata": {"contentType": "application/json"}},
    }},
}


# ------------------------------------------------------------ the upload
@router.post("/checkpoints", summary="Upload a checkpoint (multipart; write)", status_code=201,
             response_model=CheckpointRecord, tags=["checkpoints"],
             openapi_extra={"requestBody": UPLOAD_BODY},
             responses={200: {"model": CheckpointRecord, "description":
                              "the same checkpoint (same id, same sha256s) was stored already"},
                        **E400, **E401,
                        409: {"model": ErrorModel, "description":
                              "the id is registered with other content"},
                        413: {"model": ErrorModel, "description": "over --max-upload-mb"},
                        415: {"model": ErrorModel, "description": "not multipart/form-data"},
                        422: {"model": ErrorModel, "description": "invalid metadata"}})
async def upload(request: Request, claims: Write, reg: RegistryDep) -> JSONResponse:
    """Upload a checkpoint: multipart parts ``metadata`` (JSON, see
    CheckpointMetadata), ``checkpoint`` (the SB3 zip), optional ``blob`` (the raw
    .bpw).  All or nothing; 201 new, 200 repeat of an identical upload."""
    parts = MultipartUpload(reg.store, boundary_of(request.headers.get("content-type", "")))
    committed = False
    try:
        await _receive(request, parts)
        meta, ckpt, blob = _received(parts)
        await run_in_threadpool(parts.finish_files)
        _check_hashes(meta, ckpt, blob)
        if blob is not None:
            await run_in_threadpool(_check_blob, blob)
        new = _new_checkpoint(meta, ckpt, blob)
        rec, created = await run_in_threadpool(reg.db.add_checkpoint, new, claims.agent_id)
        committed = True
        await run_in_threadpool(parts.publish_files)
        return JSONResponse(rec, status_code=201 if created else 200)
    finally:
        if not committed:
            parts.discard()


async def _receive(request: Request, parts: MultipartUpload) -> None:
    """Feed the whole body to the parser as it arrives; 400 when it is cut off."""
    try:
        async for chunk in request.stream():
            parts.feed(chunk)
    except ClientDisconnect:
        raise http_error(400, "the upload was cut off (client disconnected)") from None
    if not parts.done:
        raise http_error(400, "the multipart body ended before its closing boundary")


def _received(parts: MultipartUpload) -> tuple[CheckpointMetadata, TempBlob, TempBlob | None]:
    """The validated metadata, the checkpoint file and the blob file (or None) of a
    complete body; 400 for a missing part, or a blob without its sha256 (or back)."""
    if parts.metadata is None:
        raise http_error(400, "no 'metadata' part")
    meta = _metadata_of(bytes(parts.metadata))
    ckpt, blob = parts.files.get("checkpoint"), parts.files.get("blob")
    if ckpt is None:
        raise http_error(400, "no 'checkpoint' file part")
    if (blob is None) != (meta.blob_sha256 is None):
        raise http_error(400, "a 'blob' part and metadata.blob_sha256 go together: "
                              "give both or neither")
    return meta, ckpt, blob


def _check_hashes(meta: CheckpointMetadata, ckpt: TempBlob, blob: TempBlob | None) -> None:
    """Every finished file is non-empty and hashes to what the metadata declares."""
    for what, tmp, declared in (("checkpoint", ckpt, meta.checkpoint_sha256),
                                ("blob", blob, meta.blob_sha256)):
        if tmp is None:
            continue
        if tmp.size == 0:
            raise http_error(400, f"the {what} part is empty")
        if tmp.sha256 != declared:
            raise http_error(400, f"{what} sha256 mismatch: the metadata says {declared}, "
                                  f"the {tmp.size} bytes received hash to {tmp.sha256}")


def _check_blob(tmp: TempBlob) -> None:
    """The blob is a valid *raw* .bpw (the registry serves the encodings itself)."""
    raw = tmp.path.read_bytes()
    try:
        kind = blob_kind(raw)
        if kind != "raw":
            raise ValueError(f"it is {kind}-encoded; upload the raw blob (BPW1), the "
                             "registry serves the encodings")
        parse_bpw(raw)
    except ValueError as e:
        raise http_error(400, f"the blob is not a valid raw .bpw: {e}") from None


def _new_checkpoint(meta: CheckpointMetadata, ckpt: TempBlob,
                    blob: TempBlob | None) -> NewCheckpoint:
    return NewCheckpoint(
        member=Member(id=meta.id, role=meta.role, generation=meta.generation,
                      parent=meta.parent, created=meta.created, settings=meta.settings),
        location=meta.location, checkpoint_sha256=ckpt.sha256, checkpoint_size=ckpt.size,
        blob_sha256=None if blob is None else blob.sha256,
        blob_size=None if blob is None else blob.size)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _metadata_of(raw: bytes) -> CheckpointMetadata:
    """Parse and validate the ``metadata`` part: 400 for what is not JSON, 422 for a
    JSON object that is not a valid record (a number out of range included, named by
    its field: :mod:`~brawlkit.registry.json_numbers`)."""
    try:
        obj = json_numbers.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise http_error(400, "metadata is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise http_error(400, f"metadata is not valid JSON ({e.msg} at line {e.lineno} "
                              f"column {e.colno})") from None
    except RecursionError:
        raise http_error(400, "metadata is nested too deeply") from None
    except ValueError as e:
        raise http_error(400, f"metadata: {e}") from None
    bad = json_numbers.first_out_of_range(obj)
    if bad is not None:
        where = ".".join(str(p) for p in bad[0]) or "metadata"
        of = obj.get("id") if isinstance(obj, dict) and isinstance(obj.get("id"), str) else None
        raise http_error(422, f"metadata{f' of {of[:200]!r}' if of else ''}: {where}: "
                              f"{bad[1].why()}")
    if not isinstance(obj, dict):
        raise http_error(422, "metadata must be a JSON object (a member record)")
    try:
        meta = CheckpointMetadata.model_validate(obj)
    except ValidationError as e:
        msgs = "; ".join(f"{'.'.join(str(p) for p in er['loc']) or 'metadata'}: {er['msg']}"
                         for er in e.errors()[:10])
        raise http_error(422, f"metadata is not a valid checkpoint record: {msgs}") from None
    if meta.id in permanent_ids():
        raise http_error(422, f"metadata: {meta.id!r} is a permanent member's id, never uploaded")
    try:  # the league's own rules, too
        Member.from_json(meta.model_dump())
        json.dumps(meta.settings, allow_nan=False)
    except (ValueError, TypeError, RecursionError) as e:
        raise http_error(422, f"metadata: {e}") from None
    return meta


# ------------------------------------------------------------ reading
@router.get("/checkpoints", summary="List checkpoint records (read)",
            response_model=list[CheckpointRecord], tags=["checkpoints"], responses={**E401})
def list_checkpoints(
    _c: Read,
    reg: RegistryDep,
    role: Annotated[str | None, Query(max_length=64)] = None,
    status: Annotated[Status | None, Query()] = None,
    generation: Annotated[int | None, Query(ge=0, le=2**31 - 1)] = None,
    location: Annotated[str | None, Query(max_length=TEXT_LEN)] = None,
) -> JSONResponse:
    """Every checkpoint record matching all the filters given, in registration
    order (``created``, then id)."""
    for name, value in (("role", role), ("location", location)):
        if value is not None:
            try:
                text_ok(value)
            except ValueError as e:
                raise http_error(400, f"{name} {e}") from None
    return JSONResponse(reg.db.checkpoints(role=role, status=status, generation=generation,
                                           location=location))


@router.get("/checkpoints/{checkpoint_id}", summary="One checkpoint record (read)",
            response_model=CheckpointRecord, tags=["checkpoints"],
            responses={**E400, **E401, **E404})
def get_checkpoint(checkpoint_id: IdPath, _c: Read, reg: RegistryDep) -> JSONResponse:
    """One checkpoint record."""
    return JSONResponse(checkpoint_record(reg.db, checkpoint_id))


@router.get("/checkpoints/{checkpoint_id}/checkpoint", summary="Download the SB3 zip (read)",
            tags=["checkpoints"], response_class=FileResponse,
            responses={200: {"content": {"application/zip": {}}, "description":
                             "the SB3 zip; header X-Content-SHA256"}, **E400, **E401, **E404})
def download_checkpoint(checkpoint_id: IdPath, _c: Read, reg: RegistryDep) -> Response:
    """The checkpoint's SB3 zip, with ``X-Content-SHA256``."""
    rec = checkpoint_record(reg.db, checkpoint_id)
    sha = rec["checkpoint_sha256"]
    if not reg.store.has(sha):
        raise http_error(503, f"artifact {sha} is missing from the store")
    return FileResponse(reg.store.path(sha), media_type="application/zip",
                        filename=f"{rec['id']}.zip", headers={"X-Content-SHA256": sha})


@router.get("/checkpoints/{checkpoint_id}/blob", summary="Download the .bpw, LZ4 or raw (read)",
            tags=["checkpoints"],
            responses={200: {"content": {"application/octet-stream": {}}, "description":
                             "the .bpw: an LZ4 frame of the raw blob (compression=lz4) or "
                             "the raw blob; headers X-Content-SHA256 (of the bytes sent) "
                             "and X-Blob-SHA256 (of the raw blob)"},
                       **E400, **E401, 404: {"model": ErrorModel, "description":
                                             "no such checkpoint, or it has no blob"}})
def download_blob(checkpoint_id: IdPath, _c: Read, reg: RegistryDep,
                  compression: Annotated[Literal["lz4", "none"], Query()] = "lz4",
                  ) -> Response:
    """The checkpoint's ``.bpw``: by default an LZ4 frame of the raw blob, which
    brawlkit's loaders (Python and C) read directly."""
    rec = checkpoint_record(reg.db, checkpoint_id)
    sha = rec["blob_sha256"]
    if sha is None:
        raise NotFound(f"checkpoint {checkpoint_id!r} has no blob")
    if not reg.store.has(sha):
        raise http_error(503, f"artifact {sha} is missing from the store")
    raw = reg.store.read(sha)
    body = compress_lz4(raw) if compression == "lz4" else raw
    return Response(body, media_type="application/octet-stream", headers={
        "X-Content-SHA256": hashlib.sha256(body).hexdigest(), "X-Blob-SHA256": sha,
        "Content-Disposition": f'attachment; filename="{sha[:16]}.bpw"'})


@router.get("/roles/{role}/newest", summary="Newest non-disabled checkpoint of a role (read)",
            response_model=CheckpointRecord, tags=["checkpoints"],
            responses={**E400, **E401, 404: {"model": ErrorModel, "description":
                                             "no non-disabled checkpoint of the role"}})
def newest(role: Annotated[str, Path(max_length=64)], _c: Read,
           reg: RegistryDep) -> JSONResponse:
    """The newest non-disabled checkpoint of a role (largest generation, then
    latest ``created``)."""
    if role not in role_names():
        raise http_error(400, f"unknown role {role[:64]!r} (one of {', '.join(role_names())})")
    rec = reg.db.newest(role)
    if rec is None:
        raise NotFound(f"no checkpoint of role {role!r}")
    return JSONResponse(rec)
