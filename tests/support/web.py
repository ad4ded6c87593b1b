"""The one way tests talk to ``queue-web`` in-process: the app on a test database.

:func:`web_client` builds the app from a :class:`WebSettings` (the test's DSN
plus whatever the test changes) and runs its lifespan, so the pools open and
close as in the real server. The tokens and logins below are the suite's
credentials; :data:`SECRETS` lists every secret a body must never contain.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from queue_engine.web.app import create_app
from queue_engine.web.first_run import SignInLink
from queue_engine.web.settings import Scope, User, WebSettings

READ_TOKEN = "read-token-0123456789abcdef"
PRODUCER_TOKEN = "producer-token-0123456789abcdef"
OPERATOR_TOKEN = "operator-token-0123456789abcdef"
TOKENS = {READ_TOKEN: Scope.READ, PRODUCER_TOKEN: Scope.PRODUCER, OPERATOR_TOKEN: Scope.OPERATOR}
USERS = {
    "ada": User("ada", Scope.OPERATOR, "ada-password-42"),
    "rex": User("rex", Scope.READ, "rex-password-42"),
}
SESSION_SECRET = "session-secret-0123456789abcdef"
SECRETS = (
    READ_TOKEN,
    PRODUCER_TOKEN,
    OPERATOR_TOKEN,
    "ada-password-42",
    "rex-password-42",
    SESSION_SECRET,
)


def bearer(token: str) -> dict[str, str]:
    """The Authorization header of a token."""
    return {"Authorization": f"Bearer {token}"}


def basic(name: str, password: str) -> dict[str, str]:
    """The Authorization header of a sign-in by name and password (HTTP Basic)."""
    token = base64.b64encode(f"{name}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


READ = bearer(READ_TOKEN)
PRODUCER = bearer(PRODUCER_TOKEN)
OPERATOR = bearer(OPERATOR_TOKEN)


def settings_for(dsn: str, **changes: Any) -> WebSettings:
    """The suite's settings on ``dsn``: every credential configured, short DB timeout."""
    values: dict[str, Any] = {
        "dsn": dsn,
        "tokens": TOKENS,
        "users": USERS,
        "session_secret": SESSION_SECRET,
        "db_timeout_s": 2.0,
        "pool_size": 4,
    }
    values.update(changes)
    return WebSettings(**values)


@contextmanager
def web_client(
    dsn: str, *, sign_in_link: SignInLink | None = None, **changes: Any
) -> Iterator[TestClient]:
    """A TestClient on the app, lifespan running; server errors become 500 answers.

    ``sign_in_link``: the first-run link, as ``queue-web`` makes one when
    nothing is configured (pass ``tokens={}, users={}`` too).
    """
    app = create_app(settings_for(dsn, **changes), sign_in_link=sign_in_link)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def is_problem(response: Any, status: int) -> dict[str, Any]:
    """Assert ``response`` is an RFC 9457 problem with ``status``; return its body."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["title"] and body["detail"] and body["type"]
    assert "Traceback" not in response.text
    return body
