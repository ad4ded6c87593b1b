"""What every API route needs: the state, a client on a borrowed connection, a problem."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import Request

from queue_engine.client import Client
from queue_engine.web.auth import Principal
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
