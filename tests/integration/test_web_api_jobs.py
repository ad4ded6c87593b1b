"""``/api/v1/jobs`` against a real Postgres: create, idempotency, batch, read, cancel, retry, list."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from support.jobs import count_jobs as job_count
from support.web import OPERATOR, PRODUCER, READ, is_problem, web_client

from queue_engine import Client
from queue_engine.producer.validation import JobSpec


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


def test_create_answers_201_with_the_job_and_its_location(api: TestClient) -> None:
    r = api.post(
        "/api/v1/jobs",
        json={"task": "etl.load", "queue": "load", "args": {"day": "2026-11-23"}, "priority": 5},
        headers=PRODUCER,
    )
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["task"] == "etl.load" and job["queue"] == "load" and job["priority"] == 5
    assert job["status"] == "queued" and job["args"] == {"day": "2026-11-23"}
    assert r.headers["location"] == f"/api/v1/jobs/{job['id']}"
    got = api.get(r.headers["location"], headers=READ)
    assert got.status_code == 200 and got.json()["id"] == job["id"]


def test_every_enqueue_option_reaches_the_row(api: TestClient, client: Client) -> None:
    run_at = datetime.now(UTC) + timedelta(hours=1)
    body = {
        "task": "etl.all",
        "queue": "q1",
        "args": {"a": [1, 2]},
        "priority": 7,
        "run_at": run_at.isoformat(),
        "max_attempts": 3,
        "timeout_s": 60,
        "lease_ttl_s": 30,
        "idempotency_key": "idem-all",
        "dedupe_key": "dd-all",
        "lock_key": "lk",
        "partition_key": "pk",
        "producer": "svc-a",
        "affinity_key": "model-x",
    }
    r = api.post("/api/v1/jobs", json=body, headers=PRODUCER)
    assert r.status_code == 201, r.text
    job = client.get(r.json()["id"])
    assert abs((job.available_at - run_at).total_seconds()) < 0.01
    for name in (
        "queue",
        "priority",
        "max_attempts",
        "timeout_s",
        "lease_ttl_s",
        "idempotency_key",
        "dedupe_key",
        "lock_key",
        "partition_key",
        "producer",
        "affinity_key",
    ):
        assert getattr(job, name) == body[name], name


def test_validation_errors_name_the_field_and_write_nothing(api: TestClient, conn) -> None:
    missing = is_problem(api.post("/api/v1/jobs", json={"queue": "q"}, headers=PRODUCER), 422)
    assert [e["field"] for e in missing["errors"]] == ["task"]
    typo = is_problem(
        api.post("/api/v1/jobs", json={"task": "t", "prioirty": 1}, headers=PRODUCER), 422
    )
    assert "prioirty" in typo["detail"]
    wrong_type = is_problem(
        api.post("/api/v1/jobs", json={"task": "t", "args": [1]}, headers=PRODUCER), 422
    )
    assert wrong_type["errors"][0]["field"] == "args"
    # The engine's own rules (same as Client.enqueue), after the shape checks.
    engine = is_problem(
        api.post("/api/v1/jobs", json={"task": "t", "priority": 5000}, headers=PRODUCER), 422
    )
    assert "priority" in engine["detail"]
    naive = is_problem(
        api.post(
            "/api/v1/jobs", json={"task": "t", "run_at": "2030-01-01T00:00:00"}, headers=PRODUCER
        ),
        422,
    )
    assert "run_at" in naive["detail"]
    assert is_problem(
        api.post(
            "/api/v1/jobs",
            content=b"{not json",
            headers={**PRODUCER, "content-type": "application/json"},
        ),
        400,  # malformed JSON: a 400 naming line and column, not a 422 naming "[1]"
    )
    assert job_count(conn) == 0


def test_idempotency_key_same_payload_200_different_payload_422(api: TestClient, conn) -> None:
    body = {"task": "etl.load", "queue": "load", "args": {"n": 1}}
    key = {"Idempotency-Key": "order-77"}
    first = api.post("/api/v1/jobs", json=body, headers={**PRODUCER, **key})
    assert first.status_code == 201
    again = api.post("/api/v1/jobs", json=body, headers={**PRODUCER, **key})
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["idempotency_key"] == "order-77"
    other = api.post("/api/v1/jobs", json={**body, "args": {"n": 2}}, headers={**PRODUCER, **key})
    problem = is_problem(other, 422)
    assert "args" in problem["detail"] and str(first.json()["id"]) in problem["detail"]
    clash = api.post(
        "/api/v1/jobs", json={**body, "idempotency_key": "other"}, headers={**PRODUCER, **key}
    )
    assert "idempotency_key" in is_problem(clash, 422)["detail"]
    assert job_count(conn) == 1
    # Still the same job after it finished: the key holds for as long as the job is kept.
    assert (
        api.post(f"/api/v1/jobs/{first.json()['id']}/cancel", headers=OPERATOR).status_code == 200
    )
    assert api.post("/api/v1/jobs", json=body, headers={**PRODUCER, **key}).status_code == 200


def test_an_http_enqueue_is_validated_once(
    api: TestClient, conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route checks the request (it compares a re-sent key's options); the client does not again.

    Counted as the validated requests built (``JobSpec``): one per created
    job, whichever path the client takes (plain, keyed, the ETL trigger).
    """
    built: list[JobSpec] = []
    init = JobSpec.__init__

    def counting(self: JobSpec, *args: Any, **kwargs: Any) -> None:
        built.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(JobSpec, "__init__", counting)
    requests = [
        ("/api/v1/jobs", {"task": "once.plain", "queue": "q", "args": {"n": 1}}, {}),
        ("/api/v1/jobs", {"task": "once.keyed", "args": {"n": 2}}, {"Idempotency-Key": "k1"}),
        ("/api/v1/jobs/trigger", {"task": "once.trigger", "lock_key": "lk"}, {}),
    ]
    for path, body, headers in requests:
        built.clear()
        r = api.post(path, json=body, headers={**PRODUCER, **headers})
        assert r.status_code == 201, r.text
        assert len(built) == 1, (path, body)
    assert job_count(conn) == 3


def test_batch_create_and_one_bad_item_writes_nothing(api: TestClient, conn) -> None:
    jobs = [{"task": "b.t", "args": {"i": i}} for i in range(3)]
    r = api.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=PRODUCER)
    assert r.status_code == 201, r.text
    ids = r.json()["ids"]
    assert len(ids) == 3 and ids == sorted(ids)
    bad = [{"task": "b.t"}, {"task": "b.t", "priority": -1}]
    problem = is_problem(api.post("/api/v1/jobs/batch", json={"jobs": bad}, headers=PRODUCER), 422)
    assert "jobs[1]" in problem["detail"] and "priority" in problem["detail"]
    assert job_count(conn) == 3


def test_trigger_status_and_cancel_routes_keep_the_etl_service_shape(api: TestClient) -> None:
    r = api.post(
        "/api/v1/jobs/trigger",
        json={
            "queue": "etl",
            "task": "etl.run",
            "args": {"x": 1},
            "idempotency_key": "trig-1",
            "lock_key": "cust-1",
            "partition_key": "p",
            "priority": 3,
            "available_at": datetime.now(UTC).isoformat(),
            "max_attempts": 2,
            "lease_ttl_sec": 45,
            "producer": "airflow",
        },
        headers=PRODUCER,
    )
    assert r.status_code == 201, r.text
    assert set(r.json()) == {"job_id", "status"} and r.json()["status"] == "queued"
    job_id = r.json()["job_id"]
    status = api.get(f"/api/v1/jobs/{job_id}/status", headers=READ).json()
    assert (
        status["job_id"] == job_id and status["status"] == "queued" and status["max_attempts"] == 2
    )
    full = api.get(f"/api/v1/jobs/{job_id}", headers=READ).json()
    assert (
        full["lease_ttl_s"] == 45 and full["lock_key"] == "cust-1" and full["producer"] == "airflow"
    )
    again = api.post(
        "/api/v1/jobs/trigger",
        json={
            "task": "etl.run",
            "queue": "etl",
            "args": {"x": 1},
            "idempotency_key": "trig-1",
            "lock_key": "cust-1",
            "partition_key": "p",
            "priority": 3,
            "max_attempts": 2,
            "lease_ttl_sec": 45,
            "producer": "airflow",
        },
        headers=PRODUCER,
    )
    assert again.status_code == 200 and again.json()["job_id"] == job_id
    canceled = api.post(f"/api/v1/jobs/{job_id}/cancel", headers=OPERATOR)
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
    assert (
        "already finished"
        in is_problem(api.post(f"/api/v1/jobs/{job_id}/cancel", headers=OPERATOR), 409)["detail"]
    )


def test_retry_events_and_not_found(api: TestClient) -> None:
    job_id = api.post("/api/v1/jobs", json={"task": "t"}, headers=PRODUCER).json()["id"]
    assert (
        "only failed"
        in is_problem(api.post(f"/api/v1/jobs/{job_id}/retry", headers=OPERATOR), 409)["detail"]
    )
    api.post(f"/api/v1/jobs/{job_id}/cancel", headers=OPERATOR)
    retried = api.post(f"/api/v1/jobs/{job_id}/retry", headers=OPERATOR)
    assert retried.status_code == 200 and retried.json()["status"] == "queued"
    events = api.get(f"/api/v1/jobs/{job_id}/events", headers=READ).json()
    kinds = [e["kind"] for e in events["items"]]
    assert kinds[-2:] == ["canceled", "retried"], kinds
    first_id = events["items"][0]["id"]
    later = api.get(
        f"/api/v1/jobs/{job_id}/events", params={"after": first_id}, headers=READ
    ).json()
    assert [e["id"] for e in later["items"]] == [e["id"] for e in events["items"][1:]]
    assert later["next_after"] == events["items"][-1]["id"]
    none_yet = api.get(
        f"/api/v1/jobs/{job_id}/events", params={"after": later["next_after"]}, headers=READ
    ).json()
    assert none_yet == {"items": [], "next_after": later["next_after"]}
    assert "not found" in is_problem(api.get("/api/v1/jobs/987654", headers=READ), 404)["detail"]
    assert is_problem(api.get("/api/v1/jobs/987654/events", headers=READ), 404)
    # The status route too (audit row D08): its own handler, not GET /jobs/{id}'s.
    assert (
        "not found"
        in is_problem(api.get("/api/v1/jobs/987654/status", headers=READ), 404)["detail"]
    )
    assert is_problem(api.post("/api/v1/jobs/987654/cancel", headers=OPERATOR), 404)
    assert (
        is_problem(api.get("/api/v1/jobs/0", headers=READ), 422)["errors"][0]["field"] == "job_id"
    )


def test_list_filters(api: TestClient, client: Client) -> None:
    a = client.enqueue("t.a", queue="qa", args={"customer": 1, "kind": "x"})
    b = client.enqueue("t.b", queue="qb", args={"customer": 2})
    c = client.enqueue("t.a", queue="qa", args={"customer": 1, "kind": "y"})
    client.cancel(b.id)

    def ids(**params: Any) -> list[int]:
        r = api.get("/api/v1/jobs", params=params, headers=READ)
        assert r.status_code == 200, r.text
        return [j["id"] for j in r.json()["items"]]

    assert ids() == [c.id, b.id, a.id]
    assert ids(queue="qa") == [c.id, a.id]
    assert ids(task="t.b") == [b.id]
    assert ids(status="canceled") == [b.id]
    assert ids(status=["canceled", "queued"]) == [c.id, b.id, a.id]
    assert ids(args='{"customer": 1}') == [c.id, a.id]
    assert ids(args='{"customer": 1, "kind": "y"}') == [c.id]
    assert ids(created_after=(datetime.now(UTC) + timedelta(minutes=1)).isoformat()) == []
    assert ids(created_before=(datetime.now(UTC) + timedelta(minutes=1)).isoformat()) == [
        c.id,
        b.id,
        a.id,
    ]
    assert is_problem(api.get("/api/v1/jobs", params={"args": "[1]"}, headers=READ), 422)[
        "detail"
    ].startswith("args")
    assert (
        "status"
        in is_problem(api.get("/api/v1/jobs", params={"status": "done"}, headers=READ), 422)[
            "detail"
        ]
    )
    assert (
        is_problem(api.get("/api/v1/jobs", params={"limit": 0}, headers=READ), 422)["errors"][0][
            "field"
        ]
        == "limit"
    )
    assert is_problem(
        api.get("/api/v1/jobs", params={"offset": 10, "limit": "x"}, headers=READ), 422
    )


def test_keyset_pages_are_stable_under_concurrent_inserts(
    api: TestClient, client: Client, dsn: str
) -> None:
    """Pages walked while another session inserts: every job existing at the start, once each."""
    before = client.enqueue_many([{"task": "p.t", "args": {"i": i}} for i in range(95)])
    stop = threading.Event()
    inserted: list[int] = []

    def insert() -> None:
        with Client(dsn) as other:
            while not stop.is_set():
                inserted.append(other.enqueue("p.t", args={"late": True}).id)

    thread = threading.Thread(target=insert)
    thread.start()
    try:
        seen: list[int] = []
        page = api.get("/api/v1/jobs", params={"limit": 10, "task": "p.t"}, headers=READ).json()
        first_page_top = page["items"][0]["id"]
        while True:
            seen.extend(j["id"] for j in page["items"])
            if page["next_after_id"] is None:
                break
            page = api.get(
                "/api/v1/jobs",
                params={"limit": 10, "task": "p.t", "after_id": page["next_after_id"]},
                headers=READ,
            ).json()
    finally:
        stop.set()
        thread.join()
    assert inserted, "the concurrent inserter never ran"
    assert len(seen) == len(set(seen)), "a job appeared on two pages"
    expected = sorted((i for i in [*before, *inserted] if i <= first_page_top), reverse=True)
    assert seen == expected
    assert set(before) <= set(seen)
