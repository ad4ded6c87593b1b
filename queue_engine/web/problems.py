"""Every error as RFC 9457 ``application/problem+json``; never a traceback, never a secret.

A body is ``{type, title, status, detail}`` plus, for validation errors,
``errors: [{field, message}]`` naming each field. The mapping:

====================================  ======  =====================================
raised                                status  why
====================================  ======  =====================================
request body/query/path invalid        422     FastAPI's validation, field by field
:class:`ValidationError`               422     the engine's own checks (before any write)
:class:`JobNotFound`, no schedule      404
:class:`NoLiveWorker`                  404     a park/stop that names no live worker
:class:`InvalidTransition`, exists     409     the job's status does not allow it
:class:`~queue_engine.web.auth.Unauthorized`  401  with ``WWW-Authenticate``
:class:`~queue_engine.web.auth.Forbidden`     403
a body over the cap                    413     refused by ``web.limits`` before a route runs
the database refuses (privilege,       403     the credential's database role may not
read-only transaction)                         do this: read-only enforced by Postgres
:class:`DatabaseUnavailable`,          503     with ``Retry-After``; the database is
:class:`SchemaMissing`, a lost link            down or not migrated
anything else                          500     logged (with the traceback) as ``web.error``
====================================  ======  =====================================

The messages come from the engine's exceptions, which never contain a
password (``db.describe_dsn``); a driver error's own text is not passed on,
since it can quote a connection string.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from queue_engine.controls import NoLiveWorker
from queue_engine.db import is_connection_error
from queue_engine.errors import (
    DatabaseUnavailable,
    InvalidTransition,
    JobNotFound,
    QueueEngineError,
    SchemaMissing,
    ValidationError,
)
from queue_engine.scheduler.store import ScheduleExists, ScheduleNotFound
from queue_engine.service import log_event
from queue_engine.web.auth import REALM, Forbidden, Unauthorized

PROBLEM_TYPE = "application/problem+json"
#: ``type`` URIs are relative references to the error catalogue in docs/reference/http-api.md.
TYPE_BASE = "/docs/problems#"
RETRY_AFTER_S = "5"
TITLES = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Payload too large",
    422: "Unprocessable content",
    500: "Internal server error",
    503: "Service unavailable",
}

log = logging.getLogger("queue_engine.web")


def problem(
    status: int,
    detail: str,
    *,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem+json response."""
    title = TITLES.get(status, "Error")
    body: dict[str, Any] = {
        "type": TYPE_BASE + (kind or title.lower().replace(" ", "-")),
        "title": title,
        "status": status,
        "detail": detail,
        **extra,
    }
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_TYPE)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "jobs", 3, "priority")`` → ``jobs[3].priority``; ``("query", "limit")`` → ``limit``."""
    parts = [p for p in loc if p not in ("body", "query", "path", "header")]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"field": _field(e.get("loc", ())), "message": str(e.get("msg"))} for e in exc.errors()
    ]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5]) or "invalid request"
    return problem(422, detail, kind="validation", errors=errors)


def for_error(exc: Exception) -> JSONResponse | None:
    """The response of a known error, or None for an unexpected one."""
    if isinstance(exc, Unauthorized):
        return problem(401, exc.detail, headers={"WWW-Authenticate": f"Bearer, {REALM}"})
    if isinstance(exc, Forbidden):
        return problem(403, exc.detail)
    if isinstance(exc, ValidationError):
        return problem(422, str(exc), kind="validation")
    if isinstance(exc, JobNotFound | ScheduleNotFound | NoLiveWorker):
        return problem(404, str(exc))
    if isinstance(exc, InvalidTransition | ScheduleExists):
        return problem(409, str(exc))
    if isinstance(exc, DatabaseUnavailable | SchemaMissing):
        return problem(503, str(exc), headers={"Retry-After": RETRY_AFTER_S})
    if isinstance(exc, PoolTimeout):
        return problem(
            503, "no database connection available", headers={"Retry-After": RETRY_AFTER_S}
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege | pg_errors.ReadOnlySqlTransaction):
        return problem(
            403,
            "the database refused this for the credential's role "
            f"({type(exc).__name__}): it is read-only or lacks the privilege",
            kind="database-refused",
        )
    if isinstance(exc, psycopg.OperationalError) and is_connection_error(exc):
        return problem(503, "lost the database connection", headers={"Retry-After": RETRY_AFTER_S})
    if isinstance(exc, QueueEngineError):
        return problem(400, str(exc))
    return None


async def _known(request: Request, exc: Exception) -> JSONResponse:
    response = for_error(exc)
    if response is None:
        return await _unexpected(request, exc)
    if response.status_code == 503:
        # Every request fails the same way during an outage: warn once a minute, not per request.
        state = getattr(request.app.state, "web", None)
        quiet = state is not None and not state.outage_warning_due()
        log_event(
            log,
            logging.DEBUG if quiet else logging.WARNING,
            "web.db_unavailable",
            path=request.url.path,
            reason=str(exc) if isinstance(exc, QueueEngineError) else type(exc).__name__,
        )
    return response


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "Error")
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.method} {request.url.path}"
    return problem(exc.status_code, detail, headers=dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the log, not to the client: it may show values and paths.
    log_event(
        log,
        logging.ERROR,
        "web.error",
        method=request.method,
        path=request.url.path,
        error=type(exc).__name__,
    )
    log.debug("traceback of the web.error above", exc_info=exc)
    return problem(500, f"internal error ({type(exc).__name__}); see the server log")


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    for kind in (
        Unauthorized,
        Forbidden,
        QueueEngineError,
        PoolTimeout,
        pg_errors.InsufficientPrivilege,
        pg_errors.ReadOnlySqlTransaction,
        psycopg.OperationalError,
    ):
        app.add_exception_handler(kind, _known)
    app.add_exception_handler(Exception, _unexpected)
