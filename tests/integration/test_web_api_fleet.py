"""Queues, workers, schedules and bulk actions over HTTP, against a real Postgres."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.web import OPERATOR, READ, is_problem, web_client

from queue_engine import Client
from queue_engine.producer.schedules import ScheduleSpec
from queue_engine.scheduler import store


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn, bulk_max=5) as c:
        yield c


def add_worker(
    conn: psycopg.Connection[Any], wid: str, host: str = "gpu-1", queue: str = "infer"
) -> None:
    conn.execute(
        "INSERT INTO queue_engine.workers (id, role, queue, host, pid, state, telemetry) "
        "VALUES (%s, 'worker', %s, %s, 4242, 'idle', '{\"load\": [0.5, 0.4, 0.3]}')",
        (wid, queue, host),
    )


def test_queues_list_and_controls(api: TestClient, client: Client, conn) -> None:
    client.enqueue("t", queue="infer")
    queues = api.get("/api/v1/queues", headers=READ).json()["queues"]
    infer = next(q for q in queues if q["queue"] == "infer")
    assert infer["queued"] == 1 and "throughput_per_s" in infer and "wait_p50_s" in infer
    assert infer["replicas"]["suggested"] == 1  # undeclared fields pass through the model
    paused = api.post("/api/v1/queues/infer/pause", headers=OPERATOR)
    assert paused.status_code == 200 and paused.json()["was_paused"] is False
    assert api.get("/api/v1/queues/infer", headers=READ).json()["paused"] is True
    assert api.post("/api/v1/queues/infer/resume", headers=OPERATOR).json()["was_paused"] is True
    scaled = api.post("/api/v1/queues/infer/scale", json={"limit": 2}, headers=OPERATOR).json()
    assert scaled["limit"] == 2 and scaled["changed"] is True
    rate = api.post(
        "/api/v1/queues/infer/rate", json={"rate": 2.5, "burst": 3}, headers=OPERATOR
    ).json()
    assert rate["rate"] == 2.5 and rate["burst"] == 3
    row = conn.execute(
        "SELECT scale_limit, rate_limit FROM queue_engine.queues WHERE name = 'infer'"
    ).fetchone()
    assert row == (2, 2.5)
    controls = api.get("/api/v1/controls", headers=READ).json()
    assert controls["queues"][0]["queue"] == "infer"
    assert (
        is_problem(
            api.post("/api/v1/queues/infer/scale", json={"limit": -1}, headers=OPERATOR), 422
        )["errors"][0]["field"]
        == "limit"
    )
    assert is_problem(
        api.post("/api/v1/queues/infer/rate", json={"rate": 0}, headers=OPERATOR), 422
    )
    assert (
        "queue name"
        in is_problem(api.post("/api/v1/queues/bad%20name/pause", headers=OPERATOR), 422)["detail"]
    )
    assert api.get("/api/v1/queues/never-used", headers=READ).json() == {
        "queue": "never-used",
        "known": False,
    }


def test_workers_list_park_unpark_stop(api: TestClient, conn) -> None:
    add_worker(conn, "w-1")
    add_worker(conn, "w-2", host="gpu-2")
    workers = api.get("/api/v1/workers", headers=READ).json()["workers"]
    assert {w["id"] for w in workers} == {"w-1", "w-2"}
    assert next(w for w in workers if w["id"] == "w-1")["load_1m"] == 0.5
    assert all("stop_requested" in w and "started_at" in w for w in workers)
    parked = api.post("/api/v1/workers/w-1/park", headers=OPERATOR)
    assert parked.status_code == 200, parked.text
    assert parked.json()["worker_ids"] == ["w-1"]
    host = api.post(
        "/api/v1/workers/park", json={"host": "gpu-2", "queue": "infer"}, headers=OPERATOR
    )
    assert host.json()["worker_ids"] == ["w-2"]
    assert api.post("/api/v1/workers/w-1/unpark", headers=OPERATOR).status_code == 200
    stopped = api.post("/api/v1/workers/stop", json={"host": "gpu-1"}, headers=OPERATOR).json()
    assert [(s["worker_id"], s["now"]) for s in stopped["stopped"]] == [("w-1", False)]
    hard = api.post("/api/v1/workers/w-2/stop?now=true", headers=OPERATOR).json()
    assert [(s["worker_id"], s["now"], s["already"]) for s in hard["stopped"]] == [
        ("w-2", True, False)
    ]
    upgraded = api.post(
        "/api/v1/workers/stop", json={"worker_id": "w-1", "now": True}, headers=OPERATOR
    ).json()
    assert [(s["now"], s["already"]) for s in upgraded["stopped"]] == [(True, False)]
    flags = conn.execute("SELECT id, stop_now FROM queue_engine.workers ORDER BY id").fetchall()
    assert flags == [("w-1", True), ("w-2", True)]
    assert is_problem(
        api.post("/api/v1/workers/stop", json={"host": "gpu-1", "now": "soon"}, headers=OPERATOR),
        422,
    )
    assert (
        "no live worker"
        in is_problem(api.post("/api/v1/workers/nobody/park", headers=OPERATOR), 404)["detail"]
    )
    assert (
        "--host"
        in is_problem(
            api.post("/api/v1/workers/park", json={"queue": "infer"}, headers=OPERATOR), 422
        )["detail"]
    )


def test_schedules_list_enable_disable_run_now(api: TestClient, conn, client: Client) -> None:
    with psycopg.connect(conn.info.dsn, autocommit=True) as c:
        store.add(
            c,
            "queue_engine",
            ScheduleSpec(name="nightly", expression="0 3 * * *", task="etl.nightly", queue="etl"),
        )
    listed = api.get("/api/v1/schedules", headers=READ).json()
    assert [s["name"] for s in listed["schedules"]] == ["nightly"] and listed["errors"] == []
    assert listed["schedules"][0]["next_fire"] is not None
    assert (
        api.post("/api/v1/schedules/nightly/disable", headers=OPERATOR).json()["enabled"] is False
    )
    assert api.get("/api/v1/schedules", headers=READ).json()["schedules"][0]["enabled"] is False
    assert api.post("/api/v1/schedules/nightly/enable", headers=OPERATOR).json()["enabled"] is True
    run = api.post("/api/v1/schedules/nightly/run", headers=OPERATOR).json()
    job = client.get(run["job_id"])
    assert job.task == "etl.nightly" and job.queue == "etl" and job.producer == "queue-web"
    assert is_problem(api.post("/api/v1/schedules/nope/run", headers=OPERATOR), 404)


def test_bulk_cancel_and_retry_by_ids(api: TestClient, client: Client) -> None:
    ids = client.enqueue_many([{"task": "b"} for _ in range(3)])
    client.cancel(ids[2])
    r = api.post("/api/v1/jobs/bulk/cancel", json={"ids": ids}, headers=OPERATOR).json()
    assert r["done"] == 2 and r["failed"] == 1 and r["matched"] == 3
    failed = next(i for i in r["items"] if not i["ok"])
    assert failed["id"] == ids[2] and "already finished" in failed["error"]
    retried = api.post("/api/v1/jobs/bulk/retry", json={"ids": ids}, headers=OPERATOR).json()
    assert retried["done"] == 3
    assert all(client.get(i).status == "queued" for i in ids)
    too_many = api.post(
        "/api/v1/jobs/bulk/cancel", json={"ids": list(range(1, 7))}, headers=OPERATOR
    )
    assert "at most 5" in is_problem(too_many, 422)["detail"]
    neither = api.post("/api/v1/jobs/bulk/cancel", json={}, headers=OPERATOR)
    assert "either ids or filter" in is_problem(neither, 422)["detail"]


def test_bulk_by_filter_dry_run_counts_and_the_cap_holds(api: TestClient, client: Client) -> None:
    client.enqueue_many([{"task": "f", "queue": "fq", "args": {"c": 1}} for _ in range(7)])
    client.enqueue_many([{"task": "f", "queue": "fq", "args": {"c": 2}} for _ in range(2)])
    flt = {"queue": "fq", "args": {"c": 2}}
    dry = api.post(
        "/api/v1/jobs/bulk/cancel", json={"filter": flt, "dry_run": True}, headers=OPERATOR
    ).json()
    assert dry == {
        "dry_run": True,
        "matched": 2,
        "capped": False,
        "done": 0,
        "failed": 0,
        "items": [],
    }
    assert all(j.status == "queued" for j in client.list(queue="fq"))
    everything = {"filter": {"queue": "fq"}}
    capped = api.post(
        "/api/v1/jobs/bulk/cancel", json={**everything, "dry_run": True}, headers=OPERATOR
    ).json()
    assert capped["matched"] == 5 and capped["capped"] is True
    first = api.post("/api/v1/jobs/bulk/cancel", json=everything, headers=OPERATOR).json()
    assert first["done"] == 5 and first["capped"] is True
    second = api.post("/api/v1/jobs/bulk/cancel", json=everything, headers=OPERATOR).json()
    assert second["done"] == 4 and second["capped"] is False
    assert {j.status for j in client.list(queue="fq")} == {"canceled"}
    again = api.post(
        "/api/v1/jobs/bulk/retry",
        json={"filter": {"queue": "fq", "status": ["canceled"]}, "dry_run": True},
        headers=OPERATOR,
    ).json()
    assert again["matched"] == 5 and again["capped"] is True
