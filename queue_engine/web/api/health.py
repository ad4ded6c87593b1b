"""``/health``, ``/ready`` and ``/info``: for load balancers, probes and humans.

``/health`` touches nothing but the process (a liveness probe must not fail
because the database is down, or every replica restarts at once);
``/health?db=1`` and ``/ready`` also check the database and that the schema
is at least the version this code needs (a readiness probe: take the
replica out of rotation, do not restart it). ``/info`` says which version
runs. None of them needs a credential, and none says anything secret.
"""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from queue_engine.foundation.errors import QueueEngineError
from queue_engine.foundation.migrate import ENGINE_SCHEMA_VERSION, schema_version
from queue_engine.foundation.version import __version__
from queue_engine.web.state import WebState

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """The answer of ``/health`` and ``/ready``."""

    status: str
    database: str | None = None
    schema_version: int | None = None
    schema_required: int | None = None
    detail: str | None = None


class Info(BaseModel):
    """What this server is."""

    version: str
    schema_name: str
    schema_version: int | None
    schema_required: int
    read_only: bool
    uptime_s: float


def _state(request: Request) -> WebState:
    state: WebState = request.app.state.web
    return state


def database_check(state: WebState) -> tuple[int, dict[str, Any]]:
    """(status code, body) of a readiness check: 200 when reachable and migrated, else 503."""
    with state.connection(None) as conn:
        found = schema_version(conn, state.schema)
    body: dict[str, Any] = {
        "database": "ok",
        "schema_version": found,
        "schema_required": ENGINE_SCHEMA_VERSION,
    }
    if found < ENGINE_SCHEMA_VERSION:
        return 503, {
            **body,
            "status": "unavailable",
            "detail": f"schema {state.schema!r} is at version {found}, this server needs "
            f"{ENGINE_SCHEMA_VERSION}: run `queue-ctl migrate`",
        }
    return 200, {**body, "status": "ok"}


@router.get(
    "/health",
    response_model=Health,
    response_model_exclude_none=True,
    responses={503: {"model": Health}},
)
def health(request: Request, db: bool = False) -> Any:
    """Liveness: the process answers. ``?db=1`` makes it a readiness check (as ``/ready``)."""
    if not db:
        return {"status": "ok"}
    return ready(request)


@router.get(
    "/ready",
    response_model=Health,
    response_model_exclude_none=True,
    responses={503: {"model": Health}},
)
def ready(request: Request) -> Any:
    """Readiness: the database answers and its schema is recent enough (503 otherwise)."""
    status, body = database_check(_state(request))
    return JSONResponse(body, status_code=status) if status != 200 else body


@router.get("/info", response_model=Info)
def info(request: Request) -> Any:
    """Version, schema version (None while the database is down), read-only flag, uptime."""
    state = _state(request)
    try:
        with state.connection(None) as conn:
            found: int | None = schema_version(conn, state.schema)
    except (QueueEngineError, psycopg.Error):  # a database that is down is what /info reports
        found = None
    return Info(
        version=__version__,
        schema_name=state.schema,
        schema_version=found,
        schema_required=ENGINE_SCHEMA_VERSION,
        read_only=state.settings.read_only,
        uptime_s=round(state.uptime_s, 3),
    )
