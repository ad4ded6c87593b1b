"""``/api/v1/queues`` and ``/api/v1/workers``: the fleet's figures and its operator controls.

The figures are :mod:`queue_engine.operator.stats`, the statement behind ``queue-ctl
stats`` and ``workers``: per-queue counts over index-backed slices of the
jobs table (queued, running, finished in the last hour), never a count over
the whole table. The controls are :mod:`queue_engine.operator.controls`, the functions
behind ``queue-ctl pause/resume/scale/rate/park/unpark/stop``, with the same
validation and the same answers.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request

from queue_engine.operator import controls, stats
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, api_actor, connection, errors
from queue_engine.web.api.fields import QueueName, WorkerId
from queue_engine.web.api.fleet_models import (
    ControlsOut,
    Parked,
    Paused,
    QueueKnown,
    QueueUnknown,
    Rated,
    Resumed,
    Scaled,
    Stopped,
    Unparked,
)
from queue_engine.web.api.models import (
    FleetTargetBody,
    QueuesOut,
    RateBody,
    ScaleBody,
    StopBody,
    WorkersOut,
)
from queue_engine.web.auth import Principal, require_operator, require_read

router = APIRouter(prefix=API_PREFIX, tags=["fleet"], route_class=ApiRoute)
Read = Annotated[Principal, Depends(require_read)]
Operator = Annotated[Principal, Depends(require_operator)]
Queue = Annotated[QueueName, Path(description="the queue's name")]
Worker = Annotated[WorkerId, Path(description="the worker's id (see GET /api/v1/workers)")]


def plain(value: Any) -> Any:
    """A result dataclass as JSON-ready data (datetimes as ISO 8601)."""
    if hasattr(value, "__dataclass_fields__"):
        value = asdict(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


@router.get("/queues", response_model=QueuesOut)
def list_queues(request: Request, principal: Read) -> dict[str, Any]:
    """Every queue with depth (queued, delayed, running), throughput, wait and run times, controls."""
    with connection(request, principal) as conn:
        rows = stats.queue_stats(conn, request.app.state.web.schema)
    return {"queues": [q.to_dict() for q in rows]}


@router.get("/queues/{queue}", response_model=QueueKnown | QueueUnknown)
def get_queue(queue: Queue, request: Request, principal: Read) -> dict[str, Any]:
    """One queue's figures (zeros for a queue nothing has used yet)."""
    with connection(request, principal) as conn:
        rows = stats.queue_stats(conn, request.app.state.web.schema, queue=queue)
    if not rows:
        return {"queue": queue, "known": False}
    return {**rows[0].to_dict(), "known": True}


@router.post("/queues/{queue}/pause", response_model=Paused)
def pause_queue(queue: Queue, request: Request, principal: Operator) -> dict[str, Any]:
    """Pause the queue: its workers claim nothing until it is resumed (idempotent)."""
    with connection(request, principal) as conn:
        result = controls.pause_queue(
            conn, request.app.state.web.schema, queue, by=api_actor(principal)
        )
    return plain(result)  # type: ignore[no-any-return]


@router.post("/queues/{queue}/resume", response_model=Resumed)
def resume_queue(queue: Queue, request: Request, principal: Operator) -> dict[str, Any]:
    """Resume the queue and wake its idle workers (idempotent)."""
    with connection(request, principal) as conn:
        result = controls.resume_queue(
            conn, request.app.state.web.schema, queue, by=api_actor(principal)
        )
    return plain(result)  # type: ignore[no-any-return]


@router.post("/queues/{queue}/scale", response_model=Scaled)
def scale_queue(
    queue: Queue, body: ScaleBody, request: Request, principal: Operator
) -> dict[str, Any]:
    """Let at most ``limit`` workers of the queue claim (null: no limit)."""
    with connection(request, principal) as conn:
        result = controls.scale_queue(
            conn, request.app.state.web.schema, queue, body.limit, by=api_actor(principal)
        )
    return {**plain(result), "changed": result.changed}


@router.post("/queues/{queue}/rate", response_model=Rated)
def rate_queue(
    queue: Queue, body: RateBody, request: Request, principal: Operator
) -> dict[str, Any]:
    """Start at most ``rate`` jobs/s of the queue in bursts of ``burst`` (null: no limit)."""
    with connection(request, principal) as conn:
        result = controls.rate_queue(
            conn,
            request.app.state.web.schema,
            queue,
            body.rate,
            burst=body.burst,
            by=api_actor(principal),
        )
    return {**plain(result), "changed": result.changed}


@router.get("/workers", response_model=WorkersOut)
def list_workers(request: Request, principal: Read) -> dict[str, Any]:
    """Every worker, orchestrator and scheduler row: liveness, current job, host telemetry."""
    with connection(request, principal) as conn:
        rows = stats.workers(conn, request.app.state.web.schema)
    return {"workers": [w.to_dict() | {"load_1m": w.load_1m} for w in rows]}


@router.get("/controls", response_model=ControlsOut)
def list_controls(request: Request, principal: Read) -> dict[str, Any]:
    """Every control in force: queue controls, parks and pending stop requests."""
    with connection(request, principal) as conn:
        return controls.controls(conn, request.app.state.web.schema).to_dict()


def _target(body: FleetTargetBody) -> controls.FleetTarget:
    return controls.FleetTarget(host=body.host, queue=body.queue, worker_id=body.worker_id)


@router.post(
    "/workers/park", response_model=Parked, responses=errors(404, s404="no live worker matches")
)
def park(body: FleetTargetBody, request: Request, principal: Operator) -> dict[str, Any]:
    """Park a host's workers (one queue or all; now and later) or one worker: they claim nothing."""
    target = _target(body)
    with connection(request, principal) as conn:
        result = controls.park(conn, request.app.state.web.schema, target, by=api_actor(principal))
    return plain(result)  # type: ignore[no-any-return]


@router.post(
    "/workers/unpark", response_model=Unparked, responses=errors(404, s404="no worker with that id")
)
def unpark(body: FleetTargetBody, request: Request, principal: Operator) -> dict[str, Any]:
    """Remove the park(s) of a host or of one worker."""
    target = _target(body)
    with connection(request, principal) as conn:
        result = controls.unpark(
            conn, request.app.state.web.schema, target, by=api_actor(principal)
        )
    return plain(result)  # type: ignore[no-any-return]


@router.post(
    "/workers/stop", response_model=Stopped, responses=errors(404, s404="no live worker matches")
)
def stop(body: StopBody, request: Request, principal: Operator) -> dict[str, Any]:
    """Ask the matching live workers to exit after their current job, or at once with ``now``.

    404 when no live worker matches. With ``now`` a busy worker gives its
    running job back (queued, attempt not counted) at its next heartbeat.
    """
    target = _target(body)
    with connection(request, principal) as conn:
        requests = controls.stop_workers(
            conn, request.app.state.web.schema, target, now=body.now, by=api_actor(principal)
        )
    return {"stopped": plain(requests)}


@router.post(
    "/workers/{worker_id}/park",
    response_model=Parked,
    responses=errors(404, s404="no live worker with that id"),
)
def park_worker(worker_id: Worker, request: Request, principal: Operator) -> dict[str, Any]:
    """Park one live worker."""
    return park(FleetTargetBody(worker_id=worker_id), request, principal)


@router.post(
    "/workers/{worker_id}/unpark",
    response_model=Unparked,
    responses=errors(404, s404="no worker with that id"),
)
def unpark_worker(worker_id: Worker, request: Request, principal: Operator) -> dict[str, Any]:
    """Unpark one worker."""
    return unpark(FleetTargetBody(worker_id=worker_id), request, principal)


@router.post(
    "/workers/{worker_id}/stop",
    response_model=Stopped,
    responses=errors(404, s404="no live worker with that id"),
)
def stop_worker(
    worker_id: Worker, request: Request, principal: Operator, now: bool = False
) -> dict[str, Any]:
    """Ask one live worker to exit after its current job (``?now=true``: give it back at once)."""
    return stop(StopBody(worker_id=worker_id, now=now), request, principal)
