"""``/api/v1/jobs``: create, read, list, cancel and retry jobs over HTTP.

Every route runs the engine's own :class:`~queue_engine.producer.client.Client` (or
the statements of :mod:`queue_engine.producer.operations`) on a connection borrowed
for the caller's scope, so an enqueue over HTTP is validated, keyed and
written exactly as one from Python.

Idempotency: the ``Idempotency-Key`` header is the job's ``idempotency_key``.
A first request creates the job (201); the same key with the same payload
returns that job (200), whatever its status, for as long as it is kept;
the same key with a different payload is refused (422) rather than
answered with a job that is not the one asked for.

The compatibility routes keep the shape of HTTP-triggered ETL services:
``POST /api/v1/jobs/trigger`` answers ``{job_id, status}``,
``GET /api/v1/jobs/{id}/status`` the status and outcome, and
``POST /api/v1/jobs/{id}/cancel`` is the ordinary cancel route.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from psycopg.rows import dict_row

from queue_engine.foundation.errors import ValidationError
from queue_engine.operator import stats
from queue_engine.producer import operations as ops
from queue_engine.producer.client import Client
from queue_engine.producer.jobs import Job, JobStatus
from queue_engine.web.api.deps import (
    API_PREFIX,
    ApiRoute,
    client,
    connection,
    errors,
    json_text,
    web_state,
)
from queue_engine.web.api.fields import ID_MAX, ID_MIN, JsonObject, Key, QueueName, TaskName, Time
from queue_engine.web.api.models import (
    EventOut,
    EventPage,
    JobBatch,
    JobCreate,
    JobIds,
    JobOut,
    JobPage,
    JobStatusOut,
    JobTrigger,
    Triggered,
)
from queue_engine.web.auth import Principal, require_operator, require_producer, require_read

router = APIRouter(prefix=f"{API_PREFIX}/jobs", tags=["jobs"], route_class=ApiRoute)

JobId = Annotated[int, Path(ge=ID_MIN, le=ID_MAX, description="the job's id")]
IdempotencyKey = Annotated[
    Key | None,
    Header(alias="Idempotency-Key", description="the job's idempotency key (a safe re-send)"),
]
Read = Annotated[Principal, Depends(require_read)]
Producer = Annotated[Principal, Depends(require_producer)]
Operator = Annotated[Principal, Depends(require_operator)]

#: Answers of the create routes besides 201.
CREATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "an idempotent re-send: the job that already holds the key"},
    422: {"description": "invalid options, or the idempotency key was used for other work"},
}


class IdempotencyKeyReused(ValidationError):
    """The idempotency key is held by a job with different options (422, nothing written)."""


def _enqueue(
    request: Request,
    response: Response,
    principal: Principal,
    options: dict[str, Any],
    key: str | None,
) -> Job:
    if key is not None:
        if options.get("idempotency_key") not in (None, key):
            raise ValidationError(
                "idempotency_key: the Idempotency-Key header and the body's idempotency_key differ"
            )
        options["idempotency_key"] = key
    # The engine's checks, once, before anything is written; the client
    # enqueues the spec as validated (pydantic has checked the body's shape).
    spec = ops.job_spec(**options)
    with client(request, principal) as c:
        job = c._enqueue_spec(spec)
    if (
        not job.created
        and spec.idempotency_key is not None
        and job.idempotency_key == spec.idempotency_key
    ):
        differ = ops.idempotency_mismatch(job, spec)
        if differ:
            raise IdempotencyKeyReused(
                f"idempotency key already used by job {job.id} with a different "
                f"{', '.join(differ)}: use a new key for different work"
            )
    response.status_code = 201 if job.created else 200
    response.headers["Location"] = f"{API_PREFIX}/jobs/{job.id}"
    return job


@router.post("", status_code=201, response_model=JobOut, responses=CREATE_RESPONSES)
def create_job(
    body: JobCreate,
    request: Request,
    response: Response,
    principal: Producer,
    idempotency_key: IdempotencyKey = None,
) -> JobOut:
    """Enqueue one job (201), or return the job already holding its idempotency key (200)."""
    return JobOut.of(_enqueue(request, response, principal, body.options(), idempotency_key))


@router.post("/batch", status_code=201, response_model=JobIds)
def create_jobs(body: JobBatch, request: Request, principal: Producer) -> JobIds:
    """Enqueue many jobs in one statement; their ids in input order. One bad item writes nothing."""
    with client(request, principal) as c:
        return JobIds(ids=c.enqueue_many([item.options() for item in body.jobs]))


@router.post("/trigger", status_code=201, response_model=Triggered, responses=CREATE_RESPONSES)
def trigger_job(
    body: JobTrigger,
    request: Request,
    response: Response,
    principal: Producer,
    idempotency_key: IdempotencyKey = None,
) -> Triggered:
    """Compatibility route of HTTP-triggered ETL services: enqueue, answer ``{job_id, status}``."""
    job = _enqueue(request, response, principal, body.options(), idempotency_key)
    return Triggered(job_id=job.id, status=str(job.status))


@router.get("", response_model=JobPage)
def list_jobs(
    request: Request,
    principal: Read,
    status: Annotated[list[JobStatus] | None, Query(description="repeat for several")] = None,
    queue: QueueName | None = None,
    task: TaskName | None = None,
    args: Annotated[
        str | None,
        Query(
            description='JSON object the args contain, e.g. {"customer":42}',
            json_schema_extra=json_text(JsonObject),
        ),
    ] = None,
    created_after: Time | None = None,
    created_before: Time | None = None,
    after_id: Annotated[
        int | None, Query(ge=ID_MIN, le=ID_MAX, description="the last id of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=ops.PAGE_LIMIT_MAX)] = 50,
) -> JobPage:
    """Jobs newest first, filtered; keyset pages (``after_id``), never an offset or a count."""
    statement = ops.page_statement(
        web_state(request).schema,
        statuses=None if status is None else [str(s) for s in status],
        queue=queue,
        task=task,
        args_contain=parse_args_filter(args),
        created_after=created_after,
        created_before=created_before,
        after_id=after_id,
        # One row more than asked says whether a next page exists; at the
        # engine's cap a full page offers one (which may turn out empty).
        limit=min(limit + 1, ops.PAGE_LIMIT_MAX),
    )
    with connection(request, principal) as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(statement.query, statement.params).fetchall()
    items = [JobOut.of(Job.from_row(r)) for r in rows[:limit]]
    more = len(rows) > limit or (limit == ops.PAGE_LIMIT_MAX and len(rows) == limit)
    return JobPage(items=items, next_after_id=items[-1].id if more and items else None)


def parse_args_filter(raw: str | None) -> dict[str, Any] | None:
    """The ``args`` query parameter: a JSON object, or a 422 naming it."""
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"args: not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValidationError('args: must be a JSON object, e.g. {"customer": 42}')
    return value


@router.get("/{job_id}", response_model=JobOut, responses=errors(404))
def get_job(job_id: JobId, request: Request, principal: Read) -> JobOut:
    """One job: status, attempt, times, progress, result, error."""
    with client(request, principal) as c:
        return JobOut.of(c.get(job_id))


@router.get("/{job_id}/status", response_model=JobStatusOut, responses=errors(404))
def job_status(job_id: JobId, request: Request, principal: Read) -> JobStatusOut:
    """Compatibility route of HTTP-triggered ETL services: status and outcome of one job."""
    with client(request, principal) as c:
        job = c.get(job_id)
    return JobStatusOut(
        job_id=job.id,
        status=str(job.status),
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        progress=job.progress,
        result=job.result,
        error=job.error,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )


@router.get("/{job_id}/events", response_model=EventPage, responses=errors(404))
def job_events(
    job_id: JobId,
    request: Request,
    principal: Read,
    after: Annotated[
        int | None, Query(ge=0, le=ID_MAX, description="the last event id already read")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> EventPage:
    """The job's timeline, oldest first, after the cursor ``after``."""
    state = web_state(request)
    with connection(request, principal) as conn:
        Client(conn=conn, schema=state.schema).get(
            job_id
        )  # 404 for an unknown job, rather than an empty timeline
        events = stats.job_events(conn, state.schema, job_id, after=after, limit=limit)
    items = [EventOut.model_validate(e.to_dict()) for e in events]
    return EventPage(items=items, next_after=items[-1].id if items else after)


@router.post(
    "/{job_id}/cancel",
    response_model=JobOut,
    responses=errors(404, 409, s409="the job already finished"),
)
def cancel_job(job_id: JobId, request: Request, principal: Operator) -> JobOut:
    """Cancel a queued job at once, or ask a running one to stop (409 when it already finished).

    Also the compatibility cancel route of HTTP-triggered ETL services.
    """
    with client(request, principal) as c:
        return JobOut.of(c.cancel(job_id, message=f"canceled over HTTP by {principal.name}"))


@router.post(
    "/{job_id}/retry",
    response_model=JobOut,
    responses=errors(404, 409, s409="the job is not failed, canceled or lost"),
)
def retry_job(job_id: JobId, request: Request, principal: Operator) -> JobOut:
    """Put a failed, canceled or lost job back in its queue (409 for another status)."""
    with client(request, principal) as c:
        return JobOut.of(c.retry(job_id, message=f"retried over HTTP by {principal.name}"))
