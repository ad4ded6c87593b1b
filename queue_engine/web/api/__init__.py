"""The HTTP API: health and info at the root, everything else under ``/api/v1``."""

from __future__ import annotations

from fastapi import APIRouter

from queue_engine.web.api import bulk, fleet, health, jobs, schedules

router = APIRouter()
router.include_router(health.router)
# bulk before jobs: its fixed paths must win over the jobs routes' patterns.
router.include_router(bulk.router)
router.include_router(jobs.router)
router.include_router(fleet.router)
router.include_router(schedules.router)
