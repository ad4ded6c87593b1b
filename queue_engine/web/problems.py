"""Every error as RFC 9457 ``application/problem+json``; never a traceback, never a secret.

A body is ``{type, title, status, detail}`` plus, for validation errors,
``errors: [{field, message}]`` naming each field. ``type`` is a link to the
problem's explanation, ``/docs/problems#<name>``: :data:`PROBLEM_TYPES` is the
one list of them, read by :func:`problem` (which refuses a name not in it),
by the page served at ``/docs/problems`` (:mod:`queue_engine.web.api.problems_page`)
and by the API reference. The mapping:

====================================  ======  =====================================
raised                                status  why
====================================  ======  =====================================
a body that is not JSON, or not text   400     ``malformed-body``, before any field
invalid, on a dataloader route         400     ``invalid-body`` (``--compat dataloader``)
a body not sent as JSON                415     :class:`UnsupportedMediaType`
request body/query/path invalid        422     FastAPI's validation, field by field
:class:`ValidationError`               422     the engine's own checks (before any write)
the database refuses a value           422     ``invalid-value``: a check the API
(data exception, CHECK constraint)             missed (logged as a warning), no 500
:class:`JobNotFound`, no schedule      404
:class:`WorkflowNotFound` (or node)    404
:class:`NoLiveWorker`                  404     a park/stop that names no live worker
:class:`LimitNotFound`                 404     a concurrency key with no operator's limit
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
from dataclasses import dataclass
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from queue_engine.foundation.db import is_connection_error
from queue_engine.foundation.errors import (
    DatabaseUnavailable,
    InvalidTransition,
    JobNotFound,
    QueueEngineError,
    SchemaMissing,
    ValidationError,
    WorkflowNotFound,
)
from queue_engine.foundation.logs import log_event
from queue_engine.operator.controls import NoLiveWorker
from queue_engine.operator.limits import LimitNotFound
from queue_engine.scheduler.store import ScheduleExists, ScheduleNotFound
from queue_engine.web.auth import REALM, Forbidden, Unauthorized

PROBLEM_TYPE = "application/problem+json"
#: ``type`` URIs are relative references to the page :data:`PAGE_PATH` serves.
PAGE_PATH = "/docs/problems"
TYPE_BASE = PAGE_PATH + "#"
RETRY_AFTER_S = "5"


@dataclass(frozen=True, slots=True)
class ProblemType:
    """One kind of error: its name (the URI's anchor), status, title and what to do about it."""

    name: str
    status: int
    title: str
    explanation: str

    @property
    def uri(self) -> str:
        """The ``type`` member of its problems: ``/docs/problems#<name>``."""
        return TYPE_BASE + self.name


#: Every problem type the server answers, in status order. The first of a
#: status is that status's default (a problem raised without a ``kind``).
PROBLEM_TYPES: tuple[ProblemType, ...] = (
    ProblemType(
        "malformed-body",
        400,
        "Malformed body",
        "The request body is not JSON (the detail says where it stops parsing: line and "
        "column), or it holds a lone UTF-16 surrogate escape such as \\ud800, which is "
        "valid JSON syntax but no text. Nothing was read from it: fix the body and send it again.",
    ),
    ProblemType(
        "bad-request",
        400,
        "Bad request",
        "The engine refused the request as a whole; the detail says why. Nothing was written.",
    ),
    ProblemType(
        "invalid-body",
        400,
        "Invalid request",
        "Under `queue-web --compat dataloader`, the dataloader routes answer an invalid "
        "parameter or body field with 400, as dataloader did, where the native API answers "
        "422: `errors` lists each one as {field, message}. Nothing was written.",
    ),
    ProblemType(
        "unauthorized",
        401,
        "Unauthorized",
        "No credential, or one that is not valid. Send `Authorization: Bearer <token>` with a "
        "token from QUEUE_ENGINE_WEB_TOKENS, or basic credentials of a login from "
        "QUEUE_ENGINE_WEB_USERS (see the web guide).",
    ),
    ProblemType(
        "forbidden",
        403,
        "Forbidden",
        "The credential is valid but its scope is too low for this operation (read < producer "
        "< operator), or the server runs read-only. The OpenAPI document gives each "
        "operation's scope as x-required-scope.",
    ),
    ProblemType(
        "csrf",
        403,
        "Cross-site request refused",
        "A state-changing request with a browser's credentials (login cookie, basic auth) "
        "came from another site (Sec-Fetch-Site, Origin): refused as a possible forgery. Use "
        "the dashboard's own pages, list a reverse proxy's origin in "
        "QUEUE_ENGINE_WEB_TRUSTED_ORIGINS, or call the API with a bearer token.",
    ),
    ProblemType(
        "database-refused",
        403,
        "Refused by the database",
        "The database role behind this credential may not do this (for example the read-only "
        "monitor role, or a read-only server): Postgres refused it, so nothing was written.",
    ),
    ProblemType(
        "not-found",
        404,
        "Not found",
        "No job, workflow, schedule, live worker or route of that name or id. It may never "
        "have existed, or have been pruned after its retention period.",
    ),
    ProblemType(
        "method-not-allowed",
        405,
        "Method not allowed",
        "The path exists, but not with this HTTP method; the Allow header lists those it takes.",
    ),
    ProblemType(
        "conflict",
        409,
        "Conflict",
        "The thing exists but its state does not allow this now: canceling a job that already "
        "finished, retrying a running one, giving a value to an input node that is not waiting. "
        "Read it again to see its state.",
    ),
    ProblemType(
        "payload-too-large",
        413,
        "Payload too large",
        "The request body is over the server's cap (32 MiB); split a large batch.",
    ),
    ProblemType(
        "unsupported-media-type",
        415,
        "Unsupported media type",
        "This operation takes a JSON body: send it with `Content-Type: application/json`.",
    ),
    ProblemType(
        "validation",
        422,
        "Invalid request",
        "A parameter or a body field is invalid: `errors` lists each one as {field, message}, "
        "and the OpenAPI document at /openapi.json states what each accepts (ranges, patterns, "
        "which fields go together). Nothing was written.",
    ),
    ProblemType(
        "invalid-value",
        422,
        "Value refused by the database",
        "Postgres refused a value of this request (out of its range, or against a CHECK "
        "constraint) that the API's own checks let through; nothing was written. The server "
        "logs it as web.refused_by_database: please report it, the API should have said which "
        "field.",
    ),
    ProblemType(
        "internal-server-error",
        500,
        "Internal server error",
        "An unexpected error: a bug. The detail names the exception's class; the server logs "
        "it as web.error (with the traceback at debug level). Please report it.",
    ),
    ProblemType(
        "service-unavailable",
        503,
        "Service unavailable",
        "The database is unreachable, has no free connection within the timeout, or its "
        "schema is missing or older than this server needs (run `queue-ctl migrate`). Retry "
        "after the Retry-After header's seconds; /ready says the same for load balancers.",
    ),
    ProblemType(
        "error",
        0,
        "Error",
        "Any other HTTP error; its status and detail say which.",
    ),
)
PROBLEMS_BY_NAME = {p.name: p for p in PROBLEM_TYPES}
#: The default problem type of each status.
DEFAULT_FOR_STATUS: dict[int, ProblemType] = {}
for _type in PROBLEM_TYPES:
    DEFAULT_FOR_STATUS.setdefault(_type.status, _type)


log = logging.getLogger("queue_engine.web")


class UnsupportedMediaType(QueueEngineError):
    """A body that is not JSON was sent to an operation that takes JSON (415)."""


def problem(
    status: int,
    detail: str,
    *,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem+json response of the type ``kind`` (default: the status's own type).

    ``kind`` must name one of :data:`PROBLEM_TYPES` (a KeyError otherwise: a
    unit test finds every kind the code names), so that every ``type`` link
    resolves to an explanation.
    """
    if kind is not None:
        kind_of = PROBLEMS_BY_NAME[kind]
    else:
        kind_of = DEFAULT_FOR_STATUS.get(status, PROBLEMS_BY_NAME["error"])
    body: dict[str, Any] = {
        "type": kind_of.uri,
        "title": kind_of.title,
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


def _message(error: dict[str, Any]) -> str:
    """A pydantic error's sentence; for an engine check, the engine's own (no "Value error, ")."""
    cause = (error.get("ctx") or {}).get("error")
    if error.get("type") == "value_error" and cause is not None:
        return str(cause)
    return str(error.get("msg"))


def _malformed(exc: RequestValidationError, error: dict[str, Any]) -> JSONResponse:
    """FastAPI's ``json_invalid`` (its ``loc`` is a byte offset, not a field): a 400."""
    loc = error.get("loc", ())
    pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
    doc = exc.body if isinstance(exc.body, str) else ""
    line = doc.count("\n", 0, pos) + 1
    column = pos - (doc.rfind("\n", 0, pos) + 1) + 1
    why = (error.get("ctx") or {}).get("error") or error.get("msg") or "invalid JSON"
    where = f" (line {line}, column {column})" if doc else ""
    return problem(400, f"the body is not valid JSON: {why}{where}", kind="malformed-body")


def validation_problem(
    exc: RequestValidationError, *, status: int = 422, kind: str = "validation"
) -> JSONResponse:
    """The problem of a request FastAPI found invalid: each field named (a body not JSON: 400).

    ``status``/``kind``: 422 ``validation`` natively; the dataloader
    compatibility routes answer 400 ``invalid-body``, as dataloader did.
    """
    found = list(exc.errors())
    for error in found:
        if error.get("type") == "json_invalid":
            return _malformed(exc, error)
    errors = [{"field": _field(e.get("loc", ())), "message": _message(e)} for e in found]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5]) or "invalid request"
    return problem(status, detail, kind=kind, errors=errors)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_problem(exc)


#: Errors that mean a value of the request was bad, found by the database (class
#: 22, data exception; a CHECK constraint) or by the driver encoding it: the
#: API's checks should have caught them, so they are answered 422 and logged.
REFUSED_VALUES: tuple[type[Exception], ...] = (
    psycopg.DataError,
    pg_errors.CheckViolation,
    UnicodeEncodeError,
)


def for_error(exc: Exception) -> JSONResponse | None:
    """The response of a known error, or None for an unexpected one."""
    if isinstance(exc, Unauthorized):
        return problem(401, exc.detail, headers={"WWW-Authenticate": f"Bearer, {REALM}"})
    if isinstance(exc, Forbidden):
        return problem(403, exc.detail)
    if isinstance(exc, ValidationError):
        return problem(422, str(exc), kind="validation")
    if isinstance(exc, UnsupportedMediaType):
        return problem(415, str(exc))
    if isinstance(
        exc, JobNotFound | WorkflowNotFound | ScheduleNotFound | NoLiveWorker | LimitNotFound
    ):
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
    if isinstance(exc, REFUSED_VALUES):
        return problem(
            422,
            f"the database refused a value of this request ({type(exc).__name__}); "
            "nothing was written",
            kind="invalid-value",
        )
    if isinstance(exc, QueueEngineError):
        return problem(400, str(exc), kind="bad-request")
    return None


async def _known(request: Request, exc: Exception) -> JSONResponse:
    response = for_error(exc)
    if response is None:
        return await _unexpected(request, exc)
    if isinstance(exc, REFUSED_VALUES):
        log_event(
            log,
            logging.WARNING,
            "web.refused_by_database",
            method=request.method,
            path=request.url.path,
            error=type(exc).__name__,
        )
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
    default = DEFAULT_FOR_STATUS.get(exc.status_code, PROBLEMS_BY_NAME["error"])
    detail = exc.detail if isinstance(exc.detail, str) else default.title
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
        *REFUSED_VALUES,
    ):
        app.add_exception_handler(kind, _known)
    app.add_exception_handler(Exception, _unexpected)
