"""The engine's 10 s connect timeout is a default, never an override of the user's.

libpq takes a keyword over the same parameter in the DSN, so the engine passes
its default only when neither the DSN nor ``PGCONNECT_TIMEOUT`` chose one
(``queue-ctl migrate-settings --from dataloader`` writes ``PG_CONNECT_TIMEOUT``
as ``PGCONNECT_TIMEOUT``: it must take effect).
"""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import make_conninfo

from queue_engine.foundation.db import DEFAULT_CONNECT_TIMEOUT_S, with_default_timeout


def _kwargs(dsn: str, environ: dict[str, str], **given: Any) -> dict[str, Any]:
    kwargs = dict(given)
    with_default_timeout(dsn, kwargs, environ)
    return kwargs


def test_the_default_applies_when_nothing_chose_a_timeout() -> None:
    assert _kwargs("host=db dbname=app", {}) == {"connect_timeout": DEFAULT_CONNECT_TIMEOUT_S}
    assert _kwargs("postgresql://db/app", {})["connect_timeout"] == 10


def test_a_timeout_in_the_dsn_wins_over_the_default() -> None:
    for dsn in ("host=db connect_timeout=3", "postgresql://db/app?connect_timeout=3"):
        kwargs = _kwargs(dsn, {})
        assert "connect_timeout" not in kwargs
        # What libpq gets: the DSN's own value, not ours.
        assert "connect_timeout=3" in make_conninfo(dsn, **kwargs)


def test_pgconnect_timeout_wins_over_the_default() -> None:
    assert _kwargs("host=db", {"PGCONNECT_TIMEOUT": "4"}) == {}
    assert _kwargs("host=db", {"PGCONNECT_TIMEOUT": ""}) == {"connect_timeout": 10}


def test_a_caller_keyword_is_kept() -> None:
    assert _kwargs("host=db connect_timeout=3", {}, connect_timeout=2) == {"connect_timeout": 2}


def test_a_malformed_dsn_gets_the_default_and_is_reported_by_the_connection() -> None:
    assert _kwargs("host=db 'unterminated", {}) == {"connect_timeout": 10}
