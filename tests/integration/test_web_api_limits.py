"""``/api/v1/limits`` and ``/api/v1/partitions`` over HTTP, against a real Postgres.

Good input (the figures of the flow scene, a set and a clear as the rows
show them), bad input (problem+json 4xx, nothing written), the scopes (read
for reading, operator for changing) and the audit row each change writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.audit import audit_rows
from support.flow import EXPECTED_KEYS, PARTITION_QUEUE, PARTITIONS, build_scene
from support.web import OPERATOR, PRODUCER, READ, basic, is_problem, web_client


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


def limit_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT key, max_running FROM queue_engine.concurrency_limits ORDER BY key"
    ).fetchall()


def test_list_and_get_show_running_limit_and_waiting(
    api: TestClient, conn: psycopg.Connection[Any]
) -> None:
    build_scene(conn)
    listed = api.get("/api/v1/limits", headers=READ)
    assert listed.status_code == 200
    rows = listed.json()["limits"]
    assert [r["key"] for r in rows] == ["api:partner", "held:key", "src:erp"]  # by key
    assert {r["key"]: (r["limit"], r["running"], r["waiting"]) for r in rows} == {
        k: v for k, v in EXPECTED_KEYS.items() if k != "report:daily"
    }
    assert all(r["set_at"] for r in rows)
    erp = api.get("/api/v1/limits/src:erp", headers=READ).json()
    assert (erp["max_running"], erp["running"], erp["waiting"]) == (3, 3, 5)
    # A key with running jobs but no operator's limit: its jobs' own limit, no set_at.
    daily = api.get("/api/v1/limits/report:daily", headers=READ).json()
    assert (daily["max_running"], daily["limit"], daily["set_at"]) == (None, 2, None)
    assert is_problem(api.get("/api/v1/limits/nobody", headers=READ), 404)


def test_put_and_delete_write_the_row_and_audit_who_did_it(
    api: TestClient, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="queue_engine.web"):
        first = api.put("/api/v1/limits/a/b c", json={"max_running": 4}, headers=OPERATOR)
        assert first.status_code == 200, first.text
        assert first.json() == {
            "key": "a/b c",
            "max_running": 4,
            "previous": None,
            "running": 0,
            "changed": True,
        }
        again = api.put(
            "/api/v1/limits/a%2Fb%20c",
            json={"max_running": 4},
            headers=basic("ada", "ada-password-42"),
        )
        assert again.json()["previous"] == 4 and again.json()["changed"] is False
        assert limit_rows(conn) == [("a/b c", 4)]
        cleared = api.delete("/api/v1/limits/a/b c", headers=OPERATOR)
        assert cleared.status_code == 200 and cleared.json() == {"key": "a/b c", "previous": 4}
    assert limit_rows(conn) == []
    # One audit row per change, with the principal's name (the log lines they replace).
    assert audit_rows(conn) == [
        ("limit_set", "a/b c", None, {"max_running": 4}, "token:operator", "api"),
        ("limit_set", "a/b c", {"max_running": 4}, {"max_running": 4}, "ada", "api"),
        ("limit_clear", "a/b c", {"max_running": 4}, None, "token:operator", "api"),
    ]
    assert not [r for r in caplog.records if r.getMessage().startswith("web.limit")]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("put", "/api/v1/limits/k", {"max_running": -1}, 422, "max_running"),
        ("put", "/api/v1/limits/k", {"max_running": 10001}, 422, "max_running"),
        ("put", "/api/v1/limits/k", {"max_running": "3"}, 422, "max_running"),
        ("put", "/api/v1/limits/k", {"max_running": True}, 422, "max_running"),
        ("put", "/api/v1/limits/k", {"max_running": 1.5}, 422, "max_running"),
        ("put", "/api/v1/limits/k", {}, 422, "max_running"),
        ("put", "/api/v1/limits/k", {"max_running": 1, "burst": 2}, 422, "burst"),
        ("put", "/api/v1/limits/" + "x" * 256, {"max_running": 1}, 422, "key"),
        ("put", "/api/v1/limits/a%00b", {"max_running": 1}, 422, "key"),
        ("delete", "/api/v1/limits/nobody", None, 404, None),
        ("get", "/api/v1/partitions?queue=bad%20name", None, 422, "queue"),
        ("get", "/api/v1/partitions", None, 422, "queue"),
        ("get", "/api/v1/partitions?queue=q&limit=0", None, 422, "limit"),
        ("get", "/api/v1/partitions?queue=q&limit=1001", None, 422, "limit"),
    ],
)
def test_bad_input_is_a_problem_and_writes_nothing(
    api: TestClient,
    conn: psycopg.Connection[Any],
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    field: str | None,
) -> None:
    kwargs: dict[str, Any] = {"headers": OPERATOR}
    if body is not None:
        kwargs["json"] = body
    problem = is_problem(api.request(method.upper(), path, **kwargs), status)
    if field is not None:
        assert field in [e["field"] for e in problem["errors"]], problem
    assert limit_rows(conn) == []


def test_scopes_read_reads_operator_changes(api: TestClient, conn: psycopg.Connection[Any]) -> None:
    assert is_problem(api.get("/api/v1/limits"), 401)
    assert is_problem(api.get("/api/v1/partitions?queue=q"), 401)
    for headers in (READ, PRODUCER):
        assert is_problem(
            api.put("/api/v1/limits/k", json={"max_running": 1}, headers=headers), 403
        )
        assert is_problem(api.delete("/api/v1/limits/k", headers=headers), 403)
    assert limit_rows(conn) == []
    assert api.get("/api/v1/limits", headers=READ).status_code == 200


def test_partitions_deepest_first(api: TestClient, conn: psycopg.Connection[Any]) -> None:
    build_scene(conn)
    got = api.get(f"/api/v1/partitions?queue={PARTITION_QUEUE}", headers=READ).json()
    assert got["queue"] == PARTITION_QUEUE
    assert [(p["partition_key"], p["queued"], p["running"]) for p in got["partitions"]] == [
        (k, q, r) for k, (q, r) in PARTITIONS.items()
    ]
    top = api.get(f"/api/v1/partitions?queue={PARTITION_QUEUE}&limit=1", headers=READ).json()
    assert [p["partition_key"] for p in top["partitions"]] == ["tenant-a"]
    empty = api.get("/api/v1/partitions?queue=never-used", headers=READ).json()
    assert empty == {"queue": "never-used", "partitions": []}
