"""The HTTP API: health and info at the root, everything else under ``/api/v1``."""

from __future__ import annotations

from fastapi import APIRouter

from queue_engine.web.api import health

router = APIRouter()
router.include_router(health.router)
