"""``/api/v1/limits`` and ``/api/v1/partitions``: per-key limits and where the backlog is.

The functions behind ``queue-ctl limits`` (:mod:`queue_engine.operator.limits`)
with the same validation and answers, and the figures of ``queue-ctl stats``
(:mod:`queue_engine.operator.flow`), every read bounded. Reading takes the
read scope, setting and clearing the operator scope, as the queue controls
(``/api/v1/queues/{queue}/rate``). Every change is recorded in the audit of
controls with the principal's name (``limit_set``, ``limit_clear``;
:mod:`queue_engine.operator.audit`), as every other control.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request

from queue_engine.operator import flow, limits
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, api_actor, connection, errors
from queue_engine.web.api.fields import Key, QueueName
from queue_engine.web.api.flow_models import (
    LimitBody,
    LimitCleared,
    LimitOut,
    LimitSetOut,
    LimitsOut,
    PartitionsOut,
)
from queue_engine.web.auth import Principal, require_operator, require_read

router = APIRouter(prefix=API_PREFIX, tags=["limits"], route_class=ApiRoute)
Read = Annotated[Principal, Depends(require_read)]
Operator = Annotated[Principal, Depends(require_operator)]
KeyPath = Annotated[Key, Path(description="the concurrency key (1-255 characters, no NUL)")]


@router.get("/limits", response_model=LimitsOut)
def list_limits(request: Request, principal: Read) -> dict[str, Any]:
    """Every limit operators set, by key, with running jobs and jobs waiting on the limit."""
    with connection(request, principal) as conn:
        rows = limits.list_limits(conn, request.app.state.web.schema)
    return {"limits": [r.to_dict() for r in rows]}


@router.get("/limits/{key:path}", response_model=LimitOut, responses=errors(404))
def get_limit(key: KeyPath, request: Request, principal: Read) -> dict[str, Any]:
    """One key's limit and figures (a key with running jobs but no operator's limit too)."""
    with connection(request, principal) as conn:
        rows = flow.key_flows(conn, request.app.state.web.schema, key=limits.check_key(key))
    if not rows:
        raise limits.LimitNotFound(key)
    return rows[0].to_dict()


@router.put("/limits/{key:path}", response_model=LimitSetOut)
def put_limit(
    key: KeyPath, body: LimitBody, request: Request, principal: Operator
) -> dict[str, Any]:
    """At most ``max_running`` jobs of the key run at once from the next claim on (0: none)."""
    with connection(request, principal) as conn:
        result = limits.set_limit(
            conn, request.app.state.web.schema, key, body.max_running, by=api_actor(principal)
        )
    return {
        "key": result.key,
        "max_running": result.max_running,
        "previous": result.previous,
        "running": result.running,
        "changed": result.previous != result.max_running,
    }


@router.delete(
    "/limits/{key:path}",
    response_model=LimitCleared,
    responses=errors(404, s404="the key has no operator's limit"),
)
def delete_limit(key: KeyPath, request: Request, principal: Operator) -> dict[str, Any]:
    """Remove the key's limit: its jobs follow their own ``concurrency_limit`` again."""
    with connection(request, principal) as conn:
        removed = limits.clear_limit(
            conn, request.app.state.web.schema, key, by=api_actor(principal)
        )
    if removed is None:
        raise limits.LimitNotFound(key)
    return {"key": key, "previous": removed}


@router.get("/partitions", response_model=PartitionsOut)
def list_partitions(
    request: Request,
    principal: Read,
    queue: Annotated[QueueName, Query(description="the queue whose partitions to show")],
    limit: Annotated[int, Query(ge=1, le=flow.MAX_ROWS)] = 20,
) -> dict[str, Any]:
    """The queue's deepest partitions (``partition_key``) with queued and running jobs."""
    with connection(request, principal) as conn:
        rows = flow.top_partitions(conn, request.app.state.web.schema, queue, limit=limit)
    return {"queue": queue, "partitions": [r.to_dict() for r in rows]}
