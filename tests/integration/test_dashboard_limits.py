"""The dashboard's Limits page and its forms, against a real Postgres (no browser).

The page lists the flow scene's keys to anyone with the read scope and the
forms only to operators; a form post sets or clears a limit like the API
(row written, banner, audit row with the login's name); a read login, a
cross-site post and bad input change nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest
from support.audit import audit_rows
from support.flow import build_scene
from support.web import basic, web_client

from queue_engine.operator.limits import set_rate

ADA = basic("ada", "ada-password-42")  # operator
REX = basic("rex", "rex-password-42")  # read-only


def limits(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(
        conn.execute("SELECT key, max_running FROM queue_engine.concurrency_limits").fetchall()
    )


def test_page_lists_keys_and_shows_forms_to_operators_only(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    build_scene(conn)
    with web_client(dsn) as web:
        page = web.get("/limits", headers=REX)
        assert page.status_code == 200
        for key in ("src:erp", "api:partner", "held:key", "report:daily"):
            assert f'data-key="{key}"' in page.text
        assert 'href="/limits"' in page.text  # the nav link
        assert "limit-form" not in page.text and "/actions/limits" not in page.text
        assert 'id="limit-form"' in web.get("/limits", headers=ADA).text


def test_page_shows_a_rated_keys_bucket(dsn: str, conn: psycopg.Connection[Any]) -> None:
    """A key with a rate (set from the CLI) shows its rate, burst and tokens; others show none."""
    build_scene(conn)
    set_rate(conn, "queue_engine", "api:partner", "20/s", 5)
    with web_client(dsn) as web:
        page = web.get("/limits", headers=REX).text
    row = page.split('data-key="api:partner"', 1)[1].split("</tr>", 1)[0]
    assert "20/s" in row and "burst 5" in row and "5.0 tokens now" in row
    other = page.split('data-key="src:erp"', 1)[1].split("</tr>", 1)[0]
    assert "tokens now" not in other


def test_forms_set_and_clear_with_an_audit_row(
    dsn: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with web_client(dsn) as web, caplog.at_level(logging.INFO, logger="queue_engine.web"):
        forged = web.post(
            "/actions/limits/set",
            headers=ADA | {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
            data={"key": "k/1", "max_running": "2"},
        )
        assert forged.status_code == 403
        refused = web.post(
            "/actions/limits/set", headers=REX, data={"key": "k/1", "max_running": "2"}
        )
        assert refused.status_code == 403
        assert limits(conn) == {}
        done = web.post(
            "/actions/limits/set",
            headers=ADA,
            data={"key": "k/1", "max_running": "2"},
            follow_redirects=False,
        )
        assert done.status_code == 303 and done.headers["location"].startswith("/limits?done=")
        assert limits(conn) == {"k/1": 2}
        for data in ({"key": "k/1", "max_running": "-1"}, {"key": "", "max_running": "1"}):
            bad = web.post("/actions/limits/set", headers=ADA, data=data, follow_redirects=False)
            assert "failed=" in bad.headers["location"]
        unknown = web.post(
            "/actions/limits/clear", headers=ADA, data={"key": "nobody"}, follow_redirects=False
        )
        assert "failed=no+limit+is+set" in unknown.headers["location"]
        cleared = web.post(
            "/actions/limits/clear", headers=ADA, data={"key": "k/1"}, follow_redirects=False
        )
        assert "done=" in cleared.headers["location"]
    assert limits(conn) == {}
    # Refused forms wrote nothing; each change one audit row with the login's name.
    assert audit_rows(conn) == [
        ("limit_set", "k/1", None, {"max_running": 2}, "ada", "dashboard"),
        ("limit_clear", "k/1", {"max_running": 2}, None, "ada", "dashboard"),
    ]
    with web_client(dsn) as web:
        page = web.get("/limits", headers=REX).text
    recent = page[page.index('id="recent-changes"') :]
    assert recent.index("limit_clear") < recent.index("limit_set")  # newest first
    assert "ada" in recent and "(dashboard)" in recent


def test_queues_page_shows_top_partitions_of_the_queue_asked(
    dsn: str, conn: psycopg.Connection[Any]
) -> None:
    build_scene(conn)
    with web_client(dsn) as web:
        page = web.get("/queues?partitions=ingest", headers=REX).text
        assert page.index('data-partition="tenant-a"') < page.index('data-partition="tenant-c"')
        none = web.get("/queues?partitions=etl", headers=REX).text
        assert "No job of this queue carries a partition key." in none
        bad = web.get("/queues?partitions=bad%20name", headers=REX)
        assert bad.status_code == 200 and "invalid queue name" in bad.text
