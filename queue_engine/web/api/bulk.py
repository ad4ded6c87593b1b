"""``/api/v1/jobs/bulk/cancel`` and ``/retry``: act on many jobs, by ids or by a filter.

A bulk request names its jobs by ``ids`` or by a ``filter`` (the listing's
filters); with ``dry_run`` it only counts them. It acts on at most
``QUEUE_ENGINE_WEB_BULK_MAX`` jobs (``capped`` says more match: send it
again), and the count is bounded the same way (it reads at most the cap plus
one id), so a filter that matches a million jobs costs one index walk of a
thousand rows, never a ``count(*)`` over the table.

Each job goes through the same single-job statement as ``queue-ctl cancel``
or ``retry``, so a bulk action obeys every rule a single one does: a job
that finished meanwhile is reported (``ok: false``) and the others go on.
``matched`` counts jobs, not ids: an id that names no job is not matched
(and, unless it is a dry run, reported as not found).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.errors import QueueEngineError, ValidationError
from queue_engine.producer import operations as ops
from queue_engine.producer.client import Client
from queue_engine.producer.jobs import ACTIVE_STATUSES, RETRYABLE_STATUSES, Job
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, web_state
from queue_engine.web.api.fields import ID_MAX
from queue_engine.web.api.models import BulkItem, BulkRequest, BulkResult, JobFilter
from queue_engine.web.auth import Principal, require_operator
from queue_engine.web.state import Connection

router = APIRouter(prefix=f"{API_PREFIX}/jobs/bulk", tags=["bulk"], route_class=ApiRoute)
Operator = Annotated[Principal, Depends(require_operator)]


def _matching_ids(
    conn: Connection, schema: str, flt: JobFilter, default_statuses: frozenset[str], cap: int
) -> list[int]:
    """Up to ``cap + 1`` ids of jobs matching the filter, newest first (the +1 says "more")."""
    statement = ops.page_statement(
        schema,
        statuses=flt.status or sorted(default_statuses),
        queue=flt.queue,
        task=flt.task,
        args_contain=flt.args,
        created_after=flt.created_after,
        created_before=flt.created_before,
        limit=min(cap + 1, ops.PAGE_LIMIT_MAX),
    )
    ids: list[int] = []
    # Pages of at most PAGE_LIMIT_MAX, walking the keyset until cap + 1 ids are found.
    while len(ids) <= cap:
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(statement.query, statement.params).fetchall()
        ids.extend(int(r["id"]) for r in rows)
        if len(rows) < statement.params["limit"]:
            break
        statement.params["after_id"] = ids[-1]
        statement.params["limit"] = min(cap + 1 - len(ids), ops.PAGE_LIMIT_MAX) or 1
    return ids[: cap + 1]


def _existing(conn: Connection, schema: str, ids: list[int]) -> int:
    """How many of ``ids`` name a job (an unknown id is reported, not counted as matched)."""
    bigints = [i for i in ids if i <= ID_MAX]  # a larger one names no job
    with conn.cursor() as cur:
        rows = cur.execute(queries.query("existing_job_ids", schema), {"ids": bigints})
        return len(rows.fetchall())


def _bulk(
    request: Request,
    principal: Principal,
    body: BulkRequest,
    default_statuses: frozenset[str],
    act: Callable[[Client, int], Job],
) -> BulkResult:
    state = web_state(request)
    cap = state.settings.bulk_max
    if (body.ids is None) == (body.filter is None):
        raise ValidationError("give either ids or filter, not both and not neither")
    if body.ids is not None and len(body.ids) > cap:
        raise ValidationError(f"ids: at most {cap} per request (QUEUE_ENGINE_WEB_BULK_MAX)")
    with state.connection(principal.scope) as conn:
        if body.ids is not None:
            ids = list(dict.fromkeys(body.ids))
            matched = _existing(conn, state.schema, ids)
            capped = False
        else:
            assert body.filter is not None
            ids = _matching_ids(conn, state.schema, body.filter, default_statuses, cap)
            capped = len(ids) > cap
            ids = ids[:cap]
            matched = len(ids)
        if body.dry_run:
            return BulkResult(dry_run=True, matched=matched, capped=capped)
        c = Client(conn=conn, schema=state.schema)
        items: list[BulkItem] = []
        for job_id in ids:
            try:
                job = act(c, job_id)
            except QueueEngineError as exc:
                items.append(BulkItem(id=job_id, ok=False, error=str(exc)))
            else:
                items.append(BulkItem(id=job_id, ok=True, status=str(job.status)))
    done = sum(1 for i in items if i.ok)
    return BulkResult(
        dry_run=False,
        matched=matched,
        capped=capped,
        done=done,
        failed=len(items) - done,
        items=items,
    )


@router.post("/cancel", response_model=BulkResult)
def bulk_cancel(body: BulkRequest, request: Request, principal: Operator) -> BulkResult:
    """Cancel jobs by ids or filter (a filter without status means queued and running)."""
    message = f"canceled over HTTP (bulk) by {principal.name}"
    return _bulk(
        request,
        principal,
        body,
        frozenset(str(s) for s in ACTIVE_STATUSES),
        lambda c, job_id: c.cancel(job_id, message=message),
    )


@router.post("/retry", response_model=BulkResult)
def bulk_retry(body: BulkRequest, request: Request, principal: Operator) -> BulkResult:
    """Retry jobs by ids or filter (a filter without status means failed, canceled and lost)."""
    message = f"retried over HTTP (bulk) by {principal.name}"
    return _bulk(
        request,
        principal,
        body,
        frozenset(str(s) for s in RETRYABLE_STATUSES),
        lambda c, job_id: c.retry(job_id, message=message),
    )
