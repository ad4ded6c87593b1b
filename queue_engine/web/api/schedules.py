"""``/api/v1/schedules``: list, enable, disable and run a schedule now.

The functions behind ``queue-ctl schedules`` (:mod:`queue_engine.scheduler.store`),
on a borrowed connection: an enable or disable NOTIFYs the running
schedulers in the same transaction, a run-now enqueues one job at once
(reason ``manual``, not tied to a slot).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request

from queue_engine.scheduler import store
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, connection, errors
from queue_engine.web.api.fields import ScheduleName
from queue_engine.web.api.fleet_models import ScheduleRun, ScheduleSwitched
from queue_engine.web.api.models import SchedulesOut
from queue_engine.web.auth import Principal, require_operator, require_read

router = APIRouter(prefix=f"{API_PREFIX}/schedules", tags=["schedules"], route_class=ApiRoute)
Read = Annotated[Principal, Depends(require_read)]
Operator = Annotated[Principal, Depends(require_operator)]
Name = Annotated[ScheduleName, Path(description="the schedule's name")]


@router.get("", response_model=SchedulesOut)
def list_schedules(request: Request, principal: Read) -> dict[str, Any]:
    """Every schedule with its next fire time and last slot; rows that no longer validate as errors."""
    with connection(request, principal) as conn:
        rows, broken = store.list_rows(conn, request.app.state.web.schema)
    now = datetime.now(UTC)
    return {"schedules": [store.describe(r, now) for r in rows], "errors": broken}


def _set_enabled(
    name: str, request: Request, principal: Principal, enabled: bool
) -> dict[str, Any]:
    with connection(request, principal) as conn:
        source = store.set_enabled(conn, request.app.state.web.schema, name, enabled)
    return {"name": name, "enabled": enabled, "source": source}


@router.post("/{name}/enable", response_model=ScheduleSwitched, responses=errors(404))
def enable(name: Name, request: Request, principal: Operator) -> dict[str, Any]:
    """Enable the schedule (running schedulers see it at once)."""
    return _set_enabled(name, request, principal, True)


@router.post("/{name}/disable", response_model=ScheduleSwitched, responses=errors(404))
def disable(name: Name, request: Request, principal: Operator) -> dict[str, Any]:
    """Disable the schedule: no more slots fire until it is enabled."""
    return _set_enabled(name, request, principal, False)


@router.post("/{name}/run", response_model=ScheduleRun, responses=errors(404))
def run_now(name: Name, request: Request, principal: Operator) -> dict[str, Any]:
    """Enqueue one job of the schedule now; answers its id."""
    with connection(request, principal) as conn:
        job_id = store.run_now(conn, request.app.state.web.schema, name, producer="queue-web")
    return {"name": name, "job_id": job_id}
