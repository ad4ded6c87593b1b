"""The HTTP API's answers to bad input (issue 33): a clear 4xx problem, never a 5xx.

Each test here is one of the answers a fuzzer (schemathesis) found wrong:
ids past a bigint, NUL characters and lone surrogates, bodies that are not
JSON, a bulk dry run that counted ids that name no job, JSON types read
loosely. Against a real Postgres; ``tests/process/test_web_api_fuzz.py``
runs the fuzzer itself against a live ``queue-web``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from html import escape
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.web import OPERATOR, PRODUCER, READ, is_problem, web_client

from queue_engine import Client
from queue_engine.producer.workflows import Workflow

BIG = 2**63  # one past the largest bigint


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


def job_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()
    assert row is not None
    return int(row[0])


def field_of(problem: dict[str, Any]) -> str:
    return str(problem["errors"][0]["field"])


def test_ids_and_cursors_past_a_bigint_are_a_422_naming_the_parameter(
    api: TestClient, client: Client
) -> None:
    job = client.enqueue("t.a")
    for path, field in (
        (f"/api/v1/jobs?after_id={BIG}", "after_id"),
        (f"/api/v1/workflows?before_id={BIG}", "before_id"),
        (f"/api/v1/jobs/{job.id}/events?after={BIG}", "after"),
        (f"/api/v1/jobs/{BIG}", "job_id"),
        (f"/api/v1/workflows/{BIG}", "workflow_id"),
    ):
        assert field_of(is_problem(api.get(path, headers=READ), 422)) == field, path
    # The largest bigint itself is a valid cursor.
    last = api.get(f"/api/v1/jobs?after_id={BIG - 1}", headers=READ)
    assert last.status_code == 200 and [j["id"] for j in last.json()["items"]] == [job.id]
    events = api.get(f"/api/v1/jobs/{job.id}/events?after={BIG - 1}", headers=READ)
    assert events.status_code == 200 and events.json()["items"] == []


@pytest.mark.parametrize("action", ["cancel", "retry", "provide-input"])
def test_a_workflow_id_past_a_bigint_is_a_422_not_a_503_to_retry_forever(
    api: TestClient, action: str
) -> None:
    r = api.post(f"/api/v1/workflows/{BIG}/{action}", json={"node": "n"}, headers=OPERATOR)
    assert "retry-after" not in r.headers
    assert field_of(is_problem(r, 422)) == "workflow_id"


def test_the_engine_refuses_an_id_past_a_bigint_before_the_database(client: Client) -> None:
    """The Python client too: a clear error, not a function lookup that reads as "schema missing"."""
    from queue_engine.foundation.errors import ValidationError

    with pytest.raises(ValidationError, match="at most 9223372036854775807"):
        client.cancel_workflow(BIG)
    with pytest.raises(ValidationError, match="at most 9223372036854775807"):
        client.get(BIG)


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/jobs?task=a%00b", "task"),
        ("/api/v1/jobs?queue=a%00b", "queue"),
        ("/api/v1/workflows?name=a%00b", "name"),
        ("/api/v1/queues/a%00b", "queue"),
    ],
)
def test_a_nul_in_a_name_is_a_422(
    api: TestClient, path: str, field: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="queue_engine.web"):
        problem = is_problem(api.get(path, headers=READ), 422)
    assert field_of(problem) == field and "\\x00" in problem["detail"]
    assert not any("\x00" in r.getMessage() for r in caplog.records)


def test_a_nul_in_an_args_filter_is_a_422_naming_where(api: TestClient, client: Client) -> None:
    client.enqueue("t.a", args={"a": "x"})
    listed = api.get("/api/v1/jobs", params={"args": '{"a": "x\\u0000"}'}, headers=READ)
    assert "args['a']" in is_problem(listed, 422)["detail"]
    for action in ("cancel", "retry"):
        bulk = api.post(
            f"/api/v1/jobs/bulk/{action}",
            json={"filter": {"args": {"a": "x\x00"}}, "dry_run": True},
            headers=OPERATOR,
        )
        assert "NUL" in is_problem(bulk, 422)["detail"]
        key = api.post(
            f"/api/v1/jobs/bulk/{action}",
            json={"filter": {"args": {"a\x00": 1}}},
            headers=OPERATOR,
        )
        assert "NUL" in is_problem(key, 422)["detail"]


def test_a_body_that_is_not_json_is_a_415_and_malformed_json_a_400(
    api: TestClient, dsn: str
) -> None:
    plain = api.post(
        "/api/v1/jobs", content=b"task=t", headers={**PRODUCER, "content-type": "text/plain"}
    )
    assert "application/json" in is_problem(plain, 415)["detail"]
    bare = api.post("/api/v1/jobs/batch", content=b'{"jobs": []}', headers=PRODUCER)
    assert is_problem(bare, 415)["type"].endswith("#unsupported-media-type")
    broken = api.post(
        "/api/v1/jobs",
        content=b'{\n  "task": "t",\n  "queue" "q"\n}',
        headers={**PRODUCER, "content-type": "application/json"},
    )
    problem = is_problem(broken, 400)
    assert problem["type"].endswith("#malformed-body")
    assert "line 3, column 11" in problem["detail"] and "errors" not in problem
    not_utf8 = api.post(
        "/api/v1/jobs",
        content=b'{"task": "\xff"}',
        headers={"content-type": "application/json", **PRODUCER},
    )
    assert "UTF-8" in is_problem(not_utf8, 400)["detail"]
    assert job_count(dsn) == 0


def test_a_lone_surrogate_is_a_400_not_an_encoding_error(api: TestClient, dsn: str) -> None:
    for body in (
        b'{"task": "t", "args": {"x": "\\ud800"}}',
        b'{"task": "t", "dedupe_key": "\\udfff"}',
        b'{"jobs": [{"task": "t", "producer": "a\\ud83d"}]}',
    ):
        path = "/api/v1/jobs/batch" if body.startswith(b'{"jobs"') else "/api/v1/jobs"
        r = api.post(path, content=body, headers={**PRODUCER, "content-type": "application/json"})
        assert "surrogate" in is_problem(r, 400)["detail"]
    # A pair is one character past U+FFFF: fine.
    ok = api.post(
        "/api/v1/jobs",
        content=b'{"task": "t", "args": {"x": "\\ud83d\\ude00"}}',
        headers={**PRODUCER, "content-type": "application/json"},
    )
    assert ok.status_code == 201 and ok.json()["args"] == {"x": "\U0001f600"}
    assert job_count(dsn) == 1


def test_the_engine_refuses_a_lone_surrogate_in_args(client: Client) -> None:
    from queue_engine.foundation.errors import ValidationError

    with pytest.raises(ValidationError, match=r"surrogate in args\['x'\]"):
        client.enqueue("t", args={"x": "\ud800"})


def test_run_at_with_any_offset_is_stored_and_outside_python_years_refused(
    api: TestClient, dsn: str
) -> None:
    far = api.post(
        "/api/v1/jobs", json={"task": "t", "run_at": "2030-01-01T00:00:00-23:22"}, headers=PRODUCER
    )
    assert far.status_code == 201, far.text
    assert datetime.fromisoformat(far.json()["available_at"]) == datetime(
        2030, 1, 1, 23, 22, tzinfo=UTC
    )
    for when in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        r = api.post("/api/v1/jobs", json={"task": "t", "run_at": when}, headers=PRODUCER)
        assert "years 1-9999" in is_problem(r, 422)["detail"]
    assert job_count(dsn) == 1  # nothing half-written: no row that cannot be read back
    flt = api.get(
        "/api/v1/jobs",
        params={
            "created_after": "0001-01-01T00:00:00+14:00",
            "created_before": "9999-12-31T23:59:59-23:59",
        },
        headers=READ,
    )
    assert flt.status_code == 200 and len(flt.json()["items"]) == 1


def test_json_types_are_read_as_the_document_says(api: TestClient) -> None:
    for path, body, field in (
        ("/api/v1/queues/q/scale", {"limit": False}, "limit"),
        ("/api/v1/queues/q/scale", {"limit": "3"}, "limit"),
        ("/api/v1/jobs/bulk/cancel", {"filter": {}, "dry_run": 0}, "dry_run"),
        ("/api/v1/jobs", {"task": "t", "run_at": 0}, "run_at"),
        ("/api/v1/jobs", {"task": "t", "priority": "5"}, "priority"),
    ):
        assert field_of(is_problem(api.post(path, json=body, headers=OPERATOR), 422)) == field
    numeric_time = api.get("/api/v1/jobs", params={"created_before": "0.5"}, headers=READ)
    assert field_of(is_problem(numeric_time, 422)) == "created_before"
    # An integer written as 3.0 is an integer to JSON.
    scaled = api.post("/api/v1/queues/q/scale", json={"limit": 3.0}, headers=OPERATOR)
    assert scaled.status_code == 200 and scaled.json()["limit"] == 3


def test_a_workflow_name_with_a_trailing_newline_is_a_422(api: TestClient) -> None:
    r = api.post(
        "/api/v1/workflows",
        json={"name": "w\n", "nodes": [{"node": "a", "task": "t"}]},
        headers=PRODUCER,
    )
    assert field_of(is_problem(r, 422)) == "name"
    from queue_engine.foundation.errors import ValidationError

    with pytest.raises(ValidationError, match="workflow name"):
        Workflow("w\n")


def test_bulk_dry_run_by_ids_counts_only_jobs_that_exist(api: TestClient, client: Client) -> None:
    ids = client.enqueue_many([{"task": "b"} for _ in range(2)])
    missing = api.post(
        "/api/v1/jobs/bulk/cancel", json={"ids": [999_999], "dry_run": True}, headers=OPERATOR
    )
    assert missing.status_code == 200 and missing.json()["matched"] == 0
    mixed = [*ids, 999_999, BIG]
    dry = api.post(
        "/api/v1/jobs/bulk/cancel", json={"ids": mixed, "dry_run": True}, headers=OPERATOR
    ).json()
    assert dry["matched"] == 2
    done = api.post("/api/v1/jobs/bulk/cancel", json={"ids": mixed}, headers=OPERATOR).json()
    assert done["matched"] == 2 and done["done"] == 2 and done["failed"] == 2
    assert [i["ok"] for i in done["items"]] == [True, True, False, False]


def test_the_largest_page_is_served(api: TestClient, client: Client) -> None:
    client.enqueue_many([{"task": "p"} for _ in range(3)])
    page = api.get("/api/v1/jobs", params={"limit": 1000}, headers=READ)
    assert page.status_code == 200 and len(page.json()["items"]) == 3


def test_every_problem_type_link_resolves_to_its_explanation(api: TestClient) -> None:
    from queue_engine.web.problems import PROBLEM_TYPES

    answers = [
        api.get("/api/v1/jobs"),
        api.get("/api/v1/jobs/1", headers=READ),
        api.get("/api/v1/jobs/0", headers=READ),
        api.post("/api/v1/jobs", content=b"x", headers={**PRODUCER, "content-type": "text/plain"}),
    ]
    page = api.get("/docs/problems")  # no credential
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for kind in PROBLEM_TYPES:
        assert f'id="{kind.name}"' in page.text and escape(kind.explanation[:40]) in page.text
    for answer in answers:
        path, anchor = answer.json()["type"].split("#")
        assert path == "/docs/problems" and f'id="{anchor}"' in page.text
