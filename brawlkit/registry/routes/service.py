"""``GET /health``: liveness, no token."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from brawlkit.registry.database import SCHEMA_VERSION
from brawlkit.registry.json_numbers import JSONNumbersRoute
from brawlkit.registry.schemas import API_VERSION, Health

router = APIRouter(route_class=JSONNumbersRoute)  # out-of-range numbers: 422 naming where


@router.get("/health", summary="Liveness (no token)", response_model=Health, tags=["service"])
def health() -> dict[str, Any]:
    """Liveness, no token needed."""
    return {"status": "ok", "schema_version": SCHEMA_VERSION, "api_version": API_VERSION}
