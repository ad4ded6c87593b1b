"""``queue-web --compat dataloader``: dataloader's HTTP API v1, for its clients unchanged.

dataloader (an ETL service this engine replaces) documents a trigger, a
status and a cancel route and two infrastructure routes; its clients check
``== 200``, parse ``job_id`` as a UUID and read the status fields by name.
With the switch on, these routes replace the native ones of the same paths:

- ``POST /api/v1/jobs/trigger``: every field of dataloader's body, including
  ``consumer_group`` (recorded as the job's ``consumer_group`` event); unknown
  fields ignored, as dataloader's pydantic models did by default; answers
  ``{job_id, status}`` with 200 for a new job and for one that already holds
  the idempotency key (whatever its payload: dataloader's rule, where the
  native API refuses a key reused for other work with 422);
- ``GET /api/v1/jobs/{job_id}/status``: ``{job_id, status, attempt,
  started_at, finished_at, heartbeat_at, error, progress}``, ``started_at``
  being the job's first start (``sql/dataloader_job_status.sql``);
- ``POST /api/v1/jobs/{job_id}/cancel``: the status shape of dataloader's
  example, 200 also for a job that already finished (nothing changes then);
- ``GET /health`` ``{"status": "healthy"}``; ``GET /info`` and ``GET /status``
  with ``service``, ``version``, ``environment``.

An invalid parameter or body answers 400 (``invalid-body``), an unknown job
404. ``job_id`` is a UUID: every job's is computed from its id
(:mod:`queue_engine.web.compat.ids`); an imported job also answers to its old
dataloader id through ``imported_ids``; a plain integer id is accepted too.

Credentials: as natively (status needs read, trigger producer, cancel
operator), unless ``QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS=on`` lets a request
without any in, on these routes only, and only on a loopback address unless
``QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS_ANY_HOST=on`` (:func:`check_compat`).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field

from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import ConfigError, InvalidTransition, JobNotFound
from queue_engine.foundation.errors import ValidationError as EngineValidationError
from queue_engine.foundation.sql import query
from queue_engine.foundation.version import __version__
from queue_engine.producer import operations as ops
from queue_engine.producer.client import Client
from queue_engine.web.api import health
from queue_engine.web.api.deps import API_PREFIX, ApiRoute, errors, web_state
from queue_engine.web.api.fields import Key
from queue_engine.web.api.models import JobTrigger
from queue_engine.web.auth import Principal, require_scope
from queue_engine.web.compat.ids import ID_MAX, job_id_of, job_uuid
from queue_engine.web.first_run import is_loopback
from queue_engine.web.problems import problem, validation_problem
from queue_engine.web.settings import Scope, WebSettings
from queue_engine.web.state import Connection

#: The value of ``QUEUE_ENGINE_WEB_COMPAT`` that turns this face on.
NAME = "dataloader"
#: What ``/info`` and ``/status`` answer as ``service``.
SERVICE = "queue-engine"
#: The job ids the routes accept: a UUID (hyphens optional) or a decimal id.
JOB_ID_PATTERN = (
    r"^([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
    r"|[1-9][0-9]{0,18})$"
)


class CompatRoute(ApiRoute):
    """A dataloader route: an invalid request answers 400 (``invalid-body``), as dataloader did."""

    #: The status of an invalid parameter or body (read by :mod:`queue_engine.web.openapi`).
    invalid_status = 400

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The API route's handler, with validation errors (FastAPI's, the engine's) as 400."""
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return validation_problem(exc, status=400, kind="invalid-body")
            except EngineValidationError as exc:
                return problem(400, str(exc), kind="invalid-body")

        return route


router = APIRouter(route_class=CompatRoute)

JobIdText = Annotated[
    str,
    Path(
        pattern=JOB_ID_PATTERN,
        description="the job's UUID (as the trigger answered it, or an imported job's "
        "dataloader id), or its integer id",
    ),
]
Read = Annotated[Principal, Depends(require_scope(Scope.READ, compat_route=True))]
Producer = Annotated[Principal, Depends(require_scope(Scope.PRODUCER, compat_route=True))]
Operator = Annotated[Principal, Depends(require_scope(Scope.OPERATOR, compat_route=True))]


class UnknownJob(JobNotFound):
    """No job answers to this id (404)."""

    def __init__(self, shown: str) -> None:
        LookupError.__init__(self, f"job {shown} not found")
        self.job_id = 0


class DataloaderTrigger(JobTrigger):
    """dataloader's trigger body: its fields, ``consumer_group`` too; unknown fields ignored."""

    model_config = ConfigDict(extra="ignore")

    consumer_group: Key | None = Field(
        None, description="recorded as the job's `consumer_group` event (informational)"
    )

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.enqueue`` (the group is not one)."""
        out = super().options()
        del out["consumer_group"]
        return out


class Triggered(BaseModel):
    """The trigger's answer: the job's UUID and status."""

    job_id: uuid.UUID
    status: str


class CancelOut(BaseModel):
    """The cancel's answer, as dataloader's example shows it."""

    job_id: uuid.UUID
    status: str
    attempt: int
    started_at: datetime | None = Field(description="the job's first start")
    heartbeat_at: datetime | None = Field(description="the last heartbeat")


class StatusOut(CancelOut):
    """The status route's answer."""

    finished_at: datetime | None
    error: str | None
    progress: Any = Field(description="what the handler last yielded (a JSON object), or null")


class Healthy(BaseModel):
    """``/health`` without ``?db=1``."""

    status: str


class InfoOut(health.Info):
    """``/info``: the native fields, plus dataloader's ``service`` and ``environment``."""

    service: str
    environment: str


class ServiceStatus(BaseModel):
    """``/status``: the service, its version and environment, and how long it has run."""

    status: str
    service: str
    version: str
    environment: str
    uptime_s: float


def check_compat(settings: WebSettings) -> None:
    """Refuse at start (ConfigError, exit 2) a compatibility setting that cannot stand.

    Anonymous dataloader routes need the face itself, and a loopback address
    unless ``QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS_ANY_HOST=on`` says that anyone
    who can reach the port may enqueue and cancel jobs.
    """
    if not settings.compat_anonymous:
        return
    if settings.compat != NAME:
        raise ConfigError(
            f"{table.WEB_COMPAT_ANONYMOUS.env}=on needs --compat {NAME} "
            f"({table.WEB_COMPAT.env}={NAME})"
        )
    if not is_loopback(settings.host) and not settings.compat_anonymous_any_host:
        raise ConfigError(
            f"{table.WEB_COMPAT_ANONYMOUS.env}=on lets anyone who reaches "
            f"{settings.host}:{settings.port} enqueue and cancel jobs: listen on 127.0.0.1, "
            f"or set {table.WEB_COMPAT_ANONYMOUS_ANY_HOST.env}=on to mean it"
        )


def resolve(conn: Connection, schema: str, text: str) -> tuple[int, uuid.UUID]:
    """(the job's id, the UUID to answer) for a path's id; :class:`UnknownJob` when none.

    A decimal id is the job's own (answered as its UUID); a UUID of
    :func:`~queue_engine.web.compat.ids.job_uuid` decodes to one; any other
    UUID is looked up among the jobs imported from dataloader.
    """
    if text.isdigit():
        job_id = int(text)
        if not 1 <= job_id <= ID_MAX:
            raise UnknownJob(text)
        return job_id, job_uuid(job_id)
    value = uuid.UUID(text)
    decoded = job_id_of(value)
    if decoded is not None:
        return decoded, value
    row = conn.execute(query("dataloader_imported_job", schema), {"old_id": str(value)}).fetchone()
    if row is None:
        raise UnknownJob(str(value))
    return int(row[0]), value


def status_of(conn: Connection, schema: str, job_id: int, shown: uuid.UUID) -> StatusOut:
    """The status answer of job ``job_id``, keyed ``shown``; :class:`UnknownJob` when gone."""
    cur = conn.execute(query("dataloader_job_status", schema), {"id": job_id})
    row = cur.fetchone()
    if row is None:
        raise UnknownJob(str(shown))
    names = [c.name for c in cur.description or ()]
    values = dict(zip(names, row, strict=True))
    return StatusOut(
        job_id=shown,
        status=values["status"],
        attempt=values["attempt"],
        started_at=values["started_at"],
        finished_at=values["finished_at"],
        heartbeat_at=values["heartbeat_at"],
        error=values["error"],
        progress=values["progress"],
    )


@router.post(f"{API_PREFIX}/jobs/trigger", response_model=Triggered, tags=["dataloader"])
def trigger(body: DataloaderTrigger, request: Request, principal: Producer) -> Triggered:
    """Enqueue a job, or find the one holding its idempotency key: 200 either way."""
    spec = ops.job_spec(**body.options())
    state = web_state(request)
    with state.connection(principal.scope) as conn:
        with conn.transaction():
            job = Client(conn=conn, schema=state.schema)._enqueue_spec(spec)
            if job.created and body.consumer_group is not None:
                conn.execute(
                    query("dataloader_consumer_group", state.schema),
                    {
                        "job_id": job.id,
                        "status": str(job.status),
                        "consumer_group": body.consumer_group,
                    },
                )
        old = None
        if not job.created:
            row = conn.execute(
                query("dataloader_imported_old_id", state.schema), {"new_id": job.id}
            ).fetchone()
            old = None if row is None else uuid.UUID(str(row[0]))
    return Triggered(job_id=old or job_uuid(job.id), status=str(job.status))


@router.get(
    f"{API_PREFIX}/jobs/{{job_id}}/status",
    response_model=StatusOut,
    responses=errors(404),
    tags=["dataloader"],
)
def status(job_id: JobIdText, request: Request, principal: Read) -> StatusOut:
    """The job's status, attempt, first start, end, last heartbeat, error and progress."""
    state = web_state(request)
    # A read, whoever asks: the read pool (the monitor role) when one is configured.
    with state.connection(Scope.READ) as conn:
        found, shown = resolve(conn, state.schema, job_id)
        return status_of(conn, state.schema, found, shown)


@router.post(
    f"{API_PREFIX}/jobs/{{job_id}}/cancel",
    response_model=CancelOut,
    responses=errors(404),
    tags=["dataloader"],
)
def cancel(job_id: JobIdText, request: Request, principal: Operator) -> CancelOut:
    """Cancel a queued job, ask a running one to stop; a finished one is answered as it is (200)."""
    state = web_state(request)
    with state.connection(principal.scope) as conn:
        found, shown = resolve(conn, state.schema, job_id)
        # Already finished: dataloader answered 200 with the job as it is.
        with contextlib.suppress(InvalidTransition):
            Client(conn=conn, schema=state.schema).cancel(
                found, message=f"canceled over HTTP by {principal.name} (dataloader route)"
            )
        now = status_of(conn, state.schema, found, shown)
    return CancelOut.model_validate(now.model_dump(include=set(CancelOut.model_fields)))


@router.get(
    "/health",
    response_model=Healthy,
    responses={503: {"model": health.Health}},
    tags=["health"],
)
def healthy(request: Request, db: bool = False) -> Any:
    """Liveness: ``{"status": "healthy"}``. ``?db=1``: readiness, as ``/ready`` (503 when not)."""
    if db:
        answer = health.ready(request)
        if isinstance(answer, Response):
            return answer
    return Healthy(status="healthy")


@router.get("/info", response_model=InfoOut, tags=["health"])
def info(request: Request) -> InfoOut:
    """The native ``/info``, with dataloader's ``service`` and ``environment``."""
    native = health.info(request)
    settings = web_state(request).settings
    return InfoOut(**native.model_dump(), service=SERVICE, environment=settings.environment)


@router.get("/status", response_model=ServiceStatus, tags=["health"])
def service_status(request: Request) -> ServiceStatus:
    """dataloader's infrastructure status: the service, its version, environment and uptime."""
    state = web_state(request)
    return ServiceStatus(
        status="healthy",
        service=SERVICE,
        version=__version__,
        environment=state.settings.environment,
        uptime_s=round(state.uptime_s, 3),
    )
