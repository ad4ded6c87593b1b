"""What every API route needs: the state, a client on a borrowed connection, a strict body.

:class:`ApiRoute` is the route class of every API router: a body must be
JSON (``Content-Type: application/json``, else 415 before anything is
parsed) and be text (a lone UTF-16 surrogate such as ``"\\ud800"`` is
valid JSON syntax but no text: 400, rather than an encoding error deep in
the driver).
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from queue_engine.operator.audit import Actor
from queue_engine.producer.client import Client
from queue_engine.web.auth import Principal
from queue_engine.web.problems import UnsupportedMediaType
from queue_engine.web.state import Connection, WebState

#: Every API route lives under this prefix; a breaking change gets /api/v2.
API_PREFIX = "/api/v1"


def web_state(request: Request) -> WebState:
    """The app's :class:`WebState`."""
    state: WebState = request.app.state.web
    return state


@contextmanager
def connection(request: Request, principal: Principal) -> Iterator[Connection]:
    """A connection from the pool of the caller's scope (read: the monitor role, if configured)."""
    with web_state(request).connection(principal.scope) as conn:
        yield conn


@contextmanager
def client(request: Request, principal: Principal) -> Iterator[Client]:
    """The engine's own :class:`Client` on a borrowed connection: the code path of every producer."""
    state = web_state(request)
    with state.connection(principal.scope) as conn:
        yield Client(conn=conn, schema=state.schema)


def api_actor(principal: Principal) -> Actor:
    """Who the audit of controls names for a change through the API: the principal's name."""
    return Actor(principal.name, "api")


def is_json(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (parameters allowed)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class StrictJsonRequest(Request):
    """A request whose JSON body must also be text: no lone surrogate in any string."""

    async def json(self) -> Any:
        """The parsed body; a :class:`json.JSONDecodeError` for a lone surrogate."""
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                value = json.loads(body)
            except UnicodeDecodeError as exc:
                raise json.JSONDecodeError(
                    f"not UTF-8 text ({exc.reason} at byte {exc.start})", "", 0
                ) from exc
            # A surrogate can only come in as an escape; a pair stands for one
            # character past U+FFFF and is fine, so confirm before refusing.
            if b"\\ud" in body.lower():
                try:
                    json.dumps(value, ensure_ascii=False).encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise json.JSONDecodeError(
                        "a string holds a lone UTF-16 surrogate escape, which is not text", "", 0
                    ) from exc
            self._json = value
        return self._json


class ApiRoute(APIRoute):
    """The route class of the API's routers: JSON bodies only, and only text."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, behind the content-type check, on a :class:`StrictJsonRequest`."""
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def route(request: Request) -> Response:
            strict = StrictJsonRequest(request.scope, request.receive)
            content_type = strict.headers.get("content-type")
            if takes_body and not is_json(content_type) and await strict.body():
                raise UnsupportedMediaType(
                    "send the body as JSON, with Content-Type: application/json "
                    f"(got {content_type or 'no Content-Type'})"
                )
            return await handler(strict)

        return route


def json_text(annotation: Any) -> dict[str, Any]:
    """``json_schema_extra`` of a query parameter whose text is JSON of ``annotation``'s schema.

    :mod:`queue_engine.web.openapi` turns it into the parameter's ``content``
    (``application/json``), the OpenAPI way to say "this parameter is JSON".
    """
    return {
        "contentMediaType": "application/json",
        "contentSchema": TypeAdapter(annotation).json_schema(),
    }


#: Why an operation may answer each error status (the generic ones: a route adds 404/409).
ERROR_REASONS = {
    400: "the body is not JSON, or not text",
    401: "no valid credential",
    403: "the credential's scope (or database role) may not do this",
    404: "not found",
    409: "the current state does not allow it",
    413: "the body is over the cap",
    415: "the body is not sent as application/json",
    422: "a parameter or body field is invalid (each named in `errors`)",
    503: "the database is down or not migrated: retry after Retry-After",
}


def errors(*statuses: int, **reasons: str) -> dict[int | str, dict[str, Any]]:
    """A route's ``responses`` for the domain errors it raises (404, 409), with their reasons.

    ``reasons`` keys are ``s404``, ``s409``: the sentence for that status.
    """
    return {
        status: {"description": reasons.get(f"s{status}", ERROR_REASONS[status])}
        for status in statuses
    }
