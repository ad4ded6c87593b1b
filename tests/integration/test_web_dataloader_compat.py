"""``queue-web --compat dataloader`` against a real Postgres: dataloader's HTTP API v1, example by example.

Each request and answer of the "HTTP API (v1)" section of dataloader's README
(the seeds' 004, with its quick start and its "add an ETL task" steps), and
the infrastructure routes of its notes (000: ``GET /status``), is a test
here: the status code, the field names (exactly), their JSON types
(``job_id`` parses as a UUID) and their meanings, checked against the
engine's own rows. Then what a dataloader client meets beyond the examples:
old ids of imported jobs, anonymous access when the operator opts in, and
the native API unchanged with the switch off.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.jobs import running_job
from support.web import OPERATOR, PRODUCER, READ, is_problem, web_client

from queue_engine import Client
from queue_engine.foundation.version import __version__
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain
from queue_engine.web.compat.ids import job_id_of, job_uuid

Conn = psycopg.Connection[Any]

#: The trigger body of the README's "Request" example, every field given.
README_TRIGGER = {
    "queue": "load.cbr",
    "task": "load.cbr.rates",
    "args": {"date": "2025-01-10", "currencies": ["USD", "EUR"]},
    "idempotency_key": "cbr_2025-01-10",
    "lock_key": "cbr_rates",
    "partition_key": "2025-01-10",
    "priority": 100,
    "available_at": "2025-01-10T00:00:00Z",
    "max_attempts": 3,
    "lease_ttl_sec": 300,
    "producer": "api-client",
    "consumer_group": "cbr-loaders",
}
STATUS_FIELDS = {
    "job_id",
    "status",
    "attempt",
    "started_at",
    "finished_at",
    "heartbeat_at",
    "error",
    "progress",
}
CANCEL_FIELDS = {"job_id", "status", "attempt", "started_at", "heartbeat_at"}


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn, compat="dataloader", environment="staging") as c:
        yield c


def registry_of(*definitions: TaskDefinition) -> TaskRegistry:
    """A registry of these handlers alone."""
    tasks = TaskRegistry()
    for definition in definitions:
        tasks.register(definition)
    return tasks


def job_of(answer: dict[str, Any]) -> int:
    """The engine id behind an answer's ``job_id``, which must be a UUID string in canonical form."""
    assert isinstance(answer["job_id"], str)
    value = uuid.UUID(answer["job_id"])
    assert str(value) == answer["job_id"]
    job_id = job_id_of(value)
    assert job_id is not None, answer
    return job_id


def when(text: str | None) -> datetime | None:
    """An answer's time (ISO 8601 with an offset), or None."""
    if text is None:
        return None
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert value.tzinfo is not None, text
    return value


# -- POST /api/v1/jobs/trigger ---------------------------------------------------------


def test_readme_trigger_example_answers_200_with_a_uuid_and_stores_every_field(
    api: TestClient, client: Client, conn: Conn
) -> None:
    r = api.post("/api/v1/jobs/trigger", json=README_TRIGGER, headers=PRODUCER)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"job_id", "status"} and body["status"] == "queued"
    job = client.get(job_of(body))
    assert (job.queue, job.task, job.args) == ("load.cbr", "load.cbr.rates", README_TRIGGER["args"])
    assert (job.idempotency_key, job.lock_key, job.partition_key, job.producer) == (
        "cbr_2025-01-10",
        "cbr_rates",
        "2025-01-10",
        "api-client",
    )
    assert (job.priority, job.max_attempts, job.lease_ttl_s) == (100, 3, 300)
    assert job.available_at == when("2025-01-10T00:00:00Z")
    # consumer_group: stored as the job's event, shown in its timeline.
    events = api.get(f"/api/v1/jobs/{job.id}/events", headers=READ).json()["items"]
    assert [(e["kind"], e["message"]) for e in events] == [("consumer_group", "cbr-loaders")]


def test_the_same_trigger_again_is_200_with_the_same_job_whatever_its_payload(
    api: TestClient, conn: Conn
) -> None:
    first = api.post("/api/v1/jobs/trigger", json=README_TRIGGER, headers=PRODUCER)
    again = api.post("/api/v1/jobs/trigger", json=README_TRIGGER, headers=PRODUCER)
    # dataloader's idempotency: the key returns its job, even for other args.
    other = api.post(
        "/api/v1/jobs/trigger", json={**README_TRIGGER, "args": {"date": "x"}}, headers=PRODUCER
    )
    assert [r.status_code for r in (first, again, other)] == [200, 200, 200]
    assert first.json()["job_id"] == again.json()["job_id"] == other.json()["job_id"]
    row = conn.execute("SELECT count(*) FROM queue_engine.job_events").fetchone()
    assert row == (1,)  # one consumer_group event: the re-sends created nothing


def test_quick_start_and_etl_step_examples_answer_200(api: TestClient, client: Client) -> None:
    quick_start = {
        "queue": "etl.default",
        "task": "noop",
        "args": {"sleep1": 1, "sleep2": 1, "sleep3": 1},
        "lock_key": "customer:42",
        "priority": 100,
    }
    etl_step = {
        "queue": "load.cbr",
        "task": "load.cbr.rates",
        "args": {"date": "2025-01-10", "currencies": ["USD", "EUR"]},
        "lock_key": "cbr_rates_2025-01-10",
        "partition_key": "2025-01-10",
        "priority": 100,
        "max_attempts": 3,
        "lease_ttl_sec": 300,
    }
    ids = []
    for body in (quick_start, etl_step):
        r = api.post("/api/v1/jobs/trigger", json=body, headers=PRODUCER)
        assert r.status_code == 200 and r.json()["status"] == "queued", r.text
        ids.append(job_of(r.json()))
    assert ids[0] != ids[1]
    assert client.get(ids[0]).args == quick_start["args"]
    assert client.get(ids[1]).lease_ttl_s == 300


def test_an_invalid_body_is_400_naming_the_field_and_writes_nothing(
    api: TestClient, conn: Conn
) -> None:
    cases = [
        {"queue": "q"},  # no task
        {"task": "t", "priority": "high"},
        {"task": "t", "args": [1, 2]},
        {"task": "t", "available_at": "2025-01-10"},  # no offset
        {"task": "t", "max_attempts": 0},
        {"task": "bad task name"},
    ]
    for body in cases:
        problem = is_problem(api.post("/api/v1/jobs/trigger", json=body, headers=PRODUCER), 400)
        assert problem["type"].endswith("#invalid-body") and problem["errors"], problem
    assert is_problem(
        api.post(
            "/api/v1/jobs/trigger",
            content=b"{not json",
            headers={**PRODUCER, "Content-Type": "application/json"},
        ),
        400,
    )
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone() == (0,)


def test_unknown_fields_are_ignored_as_dataloaders_models_did(
    api: TestClient, client: Client
) -> None:
    r = api.post(
        "/api/v1/jobs/trigger",
        json={"task": "noop", "queue": "q", "tenant": "acme", "retry_policy": {"x": 1}},
        headers=PRODUCER,
    )
    assert r.status_code == 200, r.text
    assert client.get(job_of(r.json())).args == {}


# -- GET /api/v1/jobs/{job_id}/status ----------------------------------------------------


def test_status_example_of_a_running_job_with_first_start_heartbeat_and_progress(
    api: TestClient, dsn: str, conn: Conn
) -> None:
    """The README's status example, from a real worker: a retried job reports its FIRST start."""
    r = api.post(
        "/api/v1/jobs/trigger",
        json={"queue": "load.cbr", "task": "load.cbr.rates", "lock_key": "cbr_rates"},
        headers=PRODUCER,
    )
    job_id = job_of(r.json())
    shown = r.json()["job_id"]
    seen: dict[str, Any] = {}

    def load(args: dict[str, Any], ctx: Any) -> Iterator[dict[str, int]]:
        if ctx.job.attempt == 1:
            raise RuntimeError("the source was down")
        yield {"processed": 500, "total": 1000}
        # While running: ask the server, as a dataloader client polls it.
        for _ in range(100):
            answer = api.get(f"/api/v1/jobs/{shown}/status", headers=READ).json()
            if answer.get("progress"):
                seen.update(answer)
                break
            threading.Event().wait(0.1)

    tasks = registry_of(
        TaskDefinition("load.cbr.rates", load, queue="load.cbr", wants_context=True)
    )
    drain(dsn, queue="load.cbr", tasks=tasks, run_delayed=True)
    first, latest = conn.execute(
        "SELECT min(e.at), j.started_at FROM queue_engine.job_events e "
        "JOIN queue_engine.jobs_all j ON j.id = e.job_id "
        "WHERE e.job_id = %s AND e.kind = 'claimed' GROUP BY j.started_at",
        (job_id,),
    ).fetchone()
    assert first < latest  # two claims: the row keeps the latest start
    assert set(seen) == STATUS_FIELDS, seen
    assert seen["job_id"] == shown and seen["status"] == "running" and seen["attempt"] == 2
    assert when(seen["started_at"]) == first
    assert when(seen["heartbeat_at"]) is not None and seen["finished_at"] is None
    assert seen["progress"] == {"processed": 500, "total": 1000}
    assert seen["error"] is None or isinstance(seen["error"], str)
    done = api.get(f"/api/v1/jobs/{shown}/status", headers=READ)
    assert done.status_code == 200 and set(done.json()) == STATUS_FIELDS
    assert done.json()["status"] == "succeeded" and when(done.json()["started_at"]) == first
    assert when(done.json()["finished_at"]) is not None


def test_status_of_a_failed_job_carries_its_error(api: TestClient, dsn: str) -> None:
    r = api.post("/api/v1/jobs/trigger", json={"task": "boom", "max_attempts": 1}, headers=PRODUCER)

    def boom(args: dict[str, Any]) -> None:
        raise ValueError("no rates for 2025-01-10")

    drain(dsn, tasks=registry_of(TaskDefinition("boom", boom)))
    answer = api.get(f"/api/v1/jobs/{r.json()['job_id']}/status", headers=READ).json()
    assert answer["status"] == "failed" and answer["attempt"] == 1
    assert "no rates for 2025-01-10" in answer["error"]
    assert when(answer["finished_at"]) is not None


def test_status_of_an_unknown_job_is_404_and_a_malformed_id_400(api: TestClient) -> None:
    for unknown in (str(job_uuid(987654)), str(uuid.uuid4()), "987654"):
        assert is_problem(api.get(f"/api/v1/jobs/{unknown}/status", headers=READ), 404)
    for malformed in ("not-a-uuid", "0", "550e8400-e29b-41d4-a716-44665544000"):
        assert is_problem(api.get(f"/api/v1/jobs/{malformed}/status", headers=READ), 400)


# -- POST /api/v1/jobs/{job_id}/cancel ----------------------------------------------------


def test_cancel_example_of_a_running_job_answers_the_status_shape(
    api: TestClient, conn: Conn
) -> None:
    job_id = running_job(conn, started="90 seconds", heartbeat="5 seconds")
    shown = str(job_uuid(job_id))
    r = api.post(f"/api/v1/jobs/{shown}/cancel", headers=OPERATOR)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == CANCEL_FIELDS, body
    assert body["job_id"] == shown and body["status"] == "running" and body["attempt"] == 1
    started, beat, flag = conn.execute(
        "SELECT started_at, heartbeat_at, cancel_requested FROM queue_engine.jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert flag is True  # the flag the worker reads at its next checkpoint
    assert (when(body["started_at"]), when(body["heartbeat_at"])) == (started, beat)


def test_cancel_of_a_queued_job_cancels_it_and_of_a_finished_one_is_200_unchanged(
    api: TestClient,
) -> None:
    shown = api.post("/api/v1/jobs/trigger", json={"task": "t"}, headers=PRODUCER).json()["job_id"]
    first = api.post(f"/api/v1/jobs/{shown}/cancel", headers=OPERATOR)
    assert first.status_code == 200 and first.json()["status"] == "canceled"
    again = api.post(f"/api/v1/jobs/{shown}/cancel", headers=OPERATOR)
    assert again.status_code == 200 and again.json() == first.json()
    assert is_problem(api.post(f"/api/v1/jobs/{job_uuid(987654)}/cancel", headers=OPERATOR), 404)


# -- infrastructure routes ---------------------------------------------------------------


def test_health_info_and_status_answer_as_dataloader(api: TestClient) -> None:
    assert api.get("/health").json() == {"status": "healthy"}
    assert api.get("/health?db=1").json() == {"status": "healthy"}
    info = api.get("/info").json()
    assert (info["service"], info["version"], info["environment"]) == (
        "queue-engine",
        __version__,
        "staging",
    )
    status = api.get("/status")
    assert status.status_code == 200
    body = status.json()
    assert (body["status"], body["service"], body["version"], body["environment"]) == (
        "healthy",
        "queue-engine",
        __version__,
        "staging",
    )
    assert isinstance(body["uptime_s"], float) and body["uptime_s"] >= 0


# -- ids, imported jobs ------------------------------------------------------------------


def test_an_imported_job_answers_to_its_old_dataloader_id(
    api: TestClient, client: Client, conn: Conn
) -> None:
    job = client.enqueue("load.cbr.rates", idempotency_key="imported-key")
    old = "550e8400-e29b-41d4-a716-446655440000"  # the README's example id
    conn.execute(
        "INSERT INTO queue_engine.imported_ids (source, kind, old_id, new_id) "
        "VALUES ('dataloader', 'job', %s, %s)",
        (old, job.id),
    )
    for asked in (old, old.upper(), old.replace("-", "")):
        r = api.get(f"/api/v1/jobs/{asked}/status", headers=READ)
        assert r.status_code == 200 and r.json()["job_id"] == old, (asked, r.text)
    # Its client re-triggers with the job's key: the old id comes back.
    again = api.post(
        "/api/v1/jobs/trigger",
        json={"task": "load.cbr.rates", "idempotency_key": "imported-key"},
        headers=PRODUCER,
    )
    assert again.status_code == 200 and again.json()["job_id"] == old
    canceled = api.post(f"/api/v1/jobs/{old}/cancel", headers=OPERATOR)
    assert canceled.json() == {**canceled.json(), "job_id": old, "status": "canceled"}
    # Its UUID here and its integer id reach it too.
    assert api.get(f"/api/v1/jobs/{job.id}/status", headers=READ).json()["job_id"] == str(
        job_uuid(job.id)
    )
    # A map row of another system is not dataloader's.
    other = str(uuid.uuid4())
    conn.execute(
        "INSERT INTO queue_engine.imported_ids (source, kind, old_id, new_id) "
        "VALUES ('pqrun', 'job', %s, %s)",
        (other, job.id),
    )
    assert is_problem(api.get(f"/api/v1/jobs/{other}/status", headers=READ), 404)


# -- credentials ---------------------------------------------------------------------------


def test_without_credentials_refused_unless_the_operator_opts_in(dsn: str) -> None:
    with web_client(dsn, compat="dataloader") as api:
        assert is_problem(api.post("/api/v1/jobs/trigger", json={"task": "t"}), 401)
    with web_client(dsn, compat="dataloader", compat_anonymous=True) as api:
        r = api.post("/api/v1/jobs/trigger", json={"task": "t"})
        assert r.status_code == 200, r.text
        shown = r.json()["job_id"]
        assert api.get(f"/api/v1/jobs/{shown}/status").json()["status"] == "queued"
        assert api.post(f"/api/v1/jobs/{shown}/cancel").json()["status"] == "canceled"
        # Only the dataloader routes: the rest of the API still wants a credential.
        assert is_problem(api.get("/api/v1/jobs"), 401)
        assert is_problem(api.post(f"/api/v1/jobs/{job_of(r.json())}/retry"), 401)
        # A wrong credential is still refused, not taken as anonymous.
        assert is_problem(
            api.post(
                "/api/v1/jobs/trigger", json={"task": "t"}, headers={"Authorization": "Bearer x"}
            ),
            401,
        )
    with web_client(dsn, compat="dataloader", compat_anonymous=True, read_only=True) as api:
        assert is_problem(api.post("/api/v1/jobs/trigger", json={"task": "t"}), 403)


# -- the switch off, and the document -------------------------------------------------------


def test_the_native_api_is_unchanged_with_the_switch_off(dsn: str) -> None:
    with web_client(dsn) as api:
        body = {"task": "t", "lock_key": "k"}
        created = api.post("/api/v1/jobs/trigger", json=body, headers=PRODUCER)
        assert created.status_code == 201 and isinstance(created.json()["job_id"], int)
        assert is_problem(
            api.post(
                "/api/v1/jobs/trigger", json={**body, "consumer_group": "g"}, headers=PRODUCER
            ),
            422,
        )
        job_id = created.json()["job_id"]
        assert "max_attempts" in api.get(f"/api/v1/jobs/{job_id}/status", headers=READ).json()
        assert api.post(f"/api/v1/jobs/{job_id}/cancel", headers=OPERATOR).json()["id"] == job_id
        assert is_problem(api.post(f"/api/v1/jobs/{job_id}/cancel", headers=OPERATOR), 409)
        assert api.get("/health").json() == {"status": "ok"}
        assert "service" not in api.get("/info").json()
        assert is_problem(api.get("/status"), 404)
        paths = api.get("/openapi.json").json()["paths"]
        assert "/status" not in paths
        assert "201" in paths["/api/v1/jobs/trigger"]["post"]["responses"]


def test_the_document_states_the_dataloader_routes(api: TestClient) -> None:
    doc = api.get("/openapi.json").json()
    trigger = doc["paths"]["/api/v1/jobs/trigger"]["post"]
    assert {"200", "400"} <= set(trigger["responses"]) and "422" not in trigger["responses"]
    assert "201" not in trigger["responses"]
    status = doc["paths"]["/api/v1/jobs/{job_id}/status"]["get"]
    assert {"200", "400", "404"} <= set(status["responses"]) and "422" not in status["responses"]
    (param,) = status["parameters"]
    assert param["schema"]["type"] == "string" and "pattern" in param["schema"]
    assert "/status" in doc["paths"] and "/api/v1/jobs/{job_id}/retry" in doc["paths"]
    body = doc["components"]["schemas"]["DataloaderTrigger"]
    assert "consumer_group" in body["properties"]
    assert body.get("additionalProperties") is not False
