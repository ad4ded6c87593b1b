"""``/api/v1/audit``: the audit of operator controls, newest first.

The read behind ``queue-ctl audit`` (:mod:`queue_engine.operator.audit`) with
the same filters and the same checks: read scope, a 422 problem for a bad
``since``, ``control`` or ``limit``. The rows are written by the controls
themselves, in their own transactions, whichever face they came through.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from queue_engine.operator import audit
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, connection
from queue_engine.web.api.fields import Key
from queue_engine.web.api.models import Open
from queue_engine.web.auth import Principal, require_read

router = APIRouter(prefix=API_PREFIX, tags=["audit"], route_class=ApiRoute)
Read = Annotated[Principal, Depends(require_read)]


class ControlEventOut(Open):
    """One recorded control: what was done to what, from which state to which, by whom."""

    id: int
    at: datetime
    control: str = Field(
        description="pause, resume, scale, rate, park, unpark, stop, limit_set, ..."
    )
    target: str = Field(description="the queue, concurrency key, worker id or host")
    before: Any = Field(description="the control's state before (null: nothing set)")
    after: Any = Field(description="the control's state after (null: nothing left)")
    actor: str = Field(description="who: the principal's name, or QUEUE_ENGINE_ACTOR / user@host")
    via: str = Field(description="cli, api, dashboard, library or sql")


class AuditOut(Open):
    """Recorded controls, newest first."""

    events: list[ControlEventOut]


@router.get("/audit", response_model=AuditOut)
def list_audit(
    request: Request,
    principal: Read,
    since: Annotated[
        str | None,
        Query(
            max_length=64,
            description="only changes since a duration ago (90m, 2d) or a time (ISO 8601)",
        ),
    ] = None,
    control: Annotated[
        str | None,
        Query(pattern=audit.CONTROL_PATTERN.pattern, description="only this control"),
    ] = None,
    target: Annotated[
        Key | None, Query(description="only changes to this queue, key, worker id or host")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=audit.MAX_ROWS)] = audit.DEFAULT_ROWS,
) -> dict[str, Any]:
    """Who changed which control, when, from what to what; newest first."""
    since_at = None if since is None else audit.parse_since(since, datetime.now(UTC))
    with connection(request, principal) as conn:
        rows = audit.list_control_events(
            conn,
            request.app.state.web.schema,
            since=since_at,
            control=control,
            target=target,
            limit=limit,
        )
    return {"events": [r.to_dict() for r in rows]}
