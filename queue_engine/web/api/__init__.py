"""The HTTP API: health and info at the root, everything else under ``/api/v1``."""

from __future__ import annotations

from fastapi import APIRouter

from queue_engine.web.api import bulk, fleet, health, jobs, problems_page, schedules, workflows

#: The API's routers, in matching order (bulk before jobs: its fixed paths must
#: win over the jobs routes' patterns). Their routes carry full paths.
ROUTERS = (
    health.router,
    bulk.router,
    jobs.router,
    fleet.router,
    schedules.router,
    workflows.router,
)

router = APIRouter()
for _sub in ROUTERS:
    router.include_router(_sub)
#: Not an operation of the API: the page its errors' ``type`` links lead to.
router.include_router(problems_page.router)
