"""Contract of the least-privilege roles (``sql/roles.sql``, ``queue-ctl roles``).

Login roles made members of the template's group roles show each is enough and
no more: a producer can enqueue (Client, bulk, SQL function) and read status
but not UPDATE/DELETE jobs, write events or change the schema; a worker can
register, heartbeat, claim and finish (the worker's own one-statement
``finish_and_claim_jobs``) but not DELETE, DROP, ALTER or CREATE; a monitor
can read the views and write nothing. Roles are cluster-wide: every name is
unique to this run and dropped afterwards.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo

from queue_engine import Client
from queue_engine.foundation.migrate import Migrator
from queue_engine.operator import stats
from queue_engine.operator.roles import roles_sql
from queue_engine.orchestrator.archiver import Cursor, archive_once
from queue_engine.producer.task_publications import publish, read
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.worker import store
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.store import ClaimGate

SCHEMA = "queue_engine"
SUFFIX = f"{os.getpid()}"
GROUPS = {
    "worker": f"qe_t_worker_{SUFFIX}",
    "producer": f"qe_t_producer_{SUFFIX}",
    "monitor": f"qe_t_monitor_{SUFFIX}",
}
LOGINS = {kind: f"{name}_login" for kind, name in GROUPS.items()}


@pytest.fixture
def role_dsns(dsn: str, conn: psycopg.Connection[Any]) -> Iterator[dict[str, str]]:
    """Apply the template, create one login role per group; drop everything after."""
    conn.execute(
        roles_sql(
            SCHEMA, worker=GROUPS["worker"], producer=GROUPS["producer"], monitor=GROUPS["monitor"]
        ).encode()
    )
    # Idempotent: a second run changes nothing and does not fail.
    conn.execute(
        roles_sql(
            SCHEMA, worker=GROUPS["worker"], producer=GROUPS["producer"], monitor=GROUPS["monitor"]
        ).encode()
    )
    for kind, login in LOGINS.items():
        conn.execute(f"CREATE ROLE {login} LOGIN PASSWORD 'pw' IN ROLE {GROUPS[kind]}")
    try:
        yield {
            kind: make_conninfo(dsn, user=login, password="pw") for kind, login in LOGINS.items()
        }
    finally:
        names = ", ".join([*LOGINS.values(), *GROUPS.values()])
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)",
            (list(LOGINS.values()),),
        )
        conn.execute(f"DROP OWNED BY {names}")
        conn.execute(f"DROP ROLE {names}")


def refused(conn: psycopg.Connection[Any], statement: str, *params: Any) -> None:
    """The statement fails with insufficient privilege (or must be owner)."""
    with pytest.raises(pg_errors.InsufficientPrivilege):
        conn.execute(statement.encode(), params or None)


def test_producer_enqueues_and_reads_but_changes_nothing_else(role_dsns) -> None:
    with Client(role_dsns["producer"]) as client:
        job = client.enqueue("roles.task", queue="r", args={"n": 1}, idempotency_key="k-1")
        assert client.get(job.id).status == "queued"
        again = client.enqueue("roles.task", queue="r", idempotency_key="k-1")
        assert again.id == job.id and not again.created
        ids = client.enqueue_many([{"task": "roles.bulk", "queue": "r"} for _ in range(3)])
        assert len(ids) == 3
        assert len(client.list(queue="r")) == 4
    with psycopg.connect(role_dsns["producer"], autocommit=True) as conn:
        row = conn.execute("SELECT queue_engine.enqueue('roles.sql', '{}'::jsonb, 'r')").fetchone()
        assert row is not None and row[0] > 0
        refused(conn, "UPDATE queue_engine.jobs SET priority = 1 WHERE id = %s", job.id)
        refused(conn, "DELETE FROM queue_engine.jobs WHERE id = %s", job.id)
        refused(conn, "INSERT INTO queue_engine.job_events (job_id, kind) VALUES (1, 'x')")
        refused(conn, "UPDATE queue_engine.workers SET state = 'x'")
        refused(conn, "UPDATE queue_engine.queues SET paused = true")
        refused(conn, "CREATE TABLE queue_engine.evil (id int)")
        refused(conn, "ALTER TABLE queue_engine.jobs ADD COLUMN evil int")
        refused(conn, "DROP TABLE queue_engine.job_events")
        refused(conn, "TRUNCATE queue_engine.jobs")


def test_worker_claims_and_finishes_but_cannot_change_the_schema(role_dsns, client) -> None:
    job = client.enqueue("roles.work", queue="rw")
    # The worker's own statements (both variants of the claim: without and with
    # a warm key), as the worker sends them.
    cold = ClaimGate(host="h")
    warm = ClaimGate(host="h", warm_key="model-a")
    common: dict[str, Any] = {"worker_id": "w-roles", "queue": "rw"}
    with psycopg.connect(role_dsns["worker"], autocommit=True) as conn:
        conn.execute(
            "INSERT INTO queue_engine.workers (id, queue, host, pid, state) "
            "VALUES ('w-roles', 'rw', 'h', 1, 'idle') "
            "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state RETURNING id"
        )
        claimed = store.finish_and_claim(conn, SCHEMA, claim_limit=1, gate=warm, **common)
        assert [j.id for j in claimed.claimed] == [job.id]
        assert (
            store.finish_and_claim(conn, SCHEMA, claim_limit=1, gate=cold, **common).claimed == []
        )
        conn.execute(
            "UPDATE queue_engine.workers SET heartbeat_at = now(), current_job_id = %s "
            "WHERE id = 'w-roles' RETURNING id",
            (job.id,),
        )
        outcome = Outcome(job.id, 1, "succeeded", "succeeded", result='{"ok": true}', duration_ms=5)
        finished = store.finish_only(conn, SCHEMA, outcomes=[outcome], host="h", **common)
        assert finished == {job.id: "succeeded"}

        refused(conn, "DELETE FROM queue_engine.jobs WHERE id = %s", job.id)
        refused(conn, "INSERT INTO queue_engine.jobs (task) VALUES ('sneaky')")
        refused(conn, "DELETE FROM queue_engine.job_events")
        refused(conn, "UPDATE queue_engine.job_events SET message = 'x'")
        refused(conn, "CREATE TABLE queue_engine.evil (id int)")
        refused(conn, "ALTER TABLE queue_engine.jobs DROP CONSTRAINT jobs_status_check")
        refused(conn, "DROP TABLE queue_engine.jobs")
        refused(conn, "DROP TRIGGER jobs_guard_transition ON queue_engine.jobs")
        refused(conn, "INSERT INTO queue_engine.job_transitions VALUES ('succeeded', 'queued')")
        # Pausing and resuming queues is an operator action.
        refused(
            conn,
            "INSERT INTO queue_engine.queues (name, paused, paused_at) VALUES ('rw', true, now())",
        )
        refused(conn, "UPDATE queue_engine.queues SET paused = true")
    final = client.get(job.id)
    assert (final.status, final.result) == ("succeeded", {"ok": True})


def test_monitor_reads_the_views_and_writes_nothing(role_dsns, client) -> None:
    client.enqueue("roles.watch", queue="rm")
    with psycopg.connect(role_dsns["monitor"], autocommit=True) as conn:
        rows = stats.queue_stats(conn, SCHEMA)
        assert [(q.queue, q.queued) for q in rows] == [("rm", 1)]
        assert stats.workers(conn, SCHEMA) == []
        refused(conn, "INSERT INTO queue_engine.jobs (task) VALUES ('x')")
        refused(conn, "UPDATE queue_engine.workers SET state = 'x'")
        refused(conn, "UPDATE queue_engine.queues SET paused = true")
        refused(conn, "CREATE TABLE queue_engine.evil (id int)")


def test_worker_takes_rate_tokens_and_reads_parks_but_sets_no_control(
    role_dsns, conn: psycopg.Connection[Any]
) -> None:
    """Schema version 4: the worker spends the bucket and reads parks; controls stay the operator's."""
    conn.execute(
        "INSERT INTO queue_engine.queues (name, rate_limit, rate_burst) VALUES ('rr', 5, 2)"
    )
    conn.execute(
        "INSERT INTO queue_engine.workers (id, queue, host, pid, state) "
        "VALUES ('w-parked', 'rr', 'h', 1, 'idle')"
    )
    conn.execute("INSERT INTO queue_engine.worker_parks (host, queue) VALUES ('h', 'rr')")
    with psycopg.connect(role_dsns["worker"], autocommit=True) as wconn:
        # A full bucket of 2: the first call gets both, the next (within far less
        # than the 0.2 s a token takes to refill at 5/s) at most what refilled.
        granted = wconn.execute("SELECT queue_engine.take_rate_tokens('rr', 5)").fetchone()
        assert granted == (2,)
        no_limit = wconn.execute("SELECT queue_engine.take_rate_tokens('free', 3)").fetchone()
        assert no_limit == (3,)
        parks = wconn.execute("SELECT host, queue FROM queue_engine.worker_parks").fetchall()
        assert parks == [("h", "rr")]
        # Its own row: state (parked), warm key, and reading a stop request back.
        wconn.execute(
            "UPDATE queue_engine.workers SET state = 'parked', warm_key = 'model-a' "
            "WHERE id = 'w-parked' RETURNING stop_requested_at"
        )
        refused(wconn, "UPDATE queue_engine.queues SET scale_limit = 100")
        refused(wconn, "UPDATE queue_engine.queues SET rate_limit = 100000")
        refused(wconn, "UPDATE queue_engine.queues SET rate_burst = 100000")
        # The bucket itself: only through take_rate_tokens (SECURITY DEFINER).
        refused(wconn, "UPDATE queue_engine.queues SET rate_tokens = 100000")
        refused(wconn, "UPDATE queue_engine.queues SET paused = false")
        refused(wconn, "INSERT INTO queue_engine.queues (name) VALUES ('new.q')")
        refused(wconn, "INSERT INTO queue_engine.worker_parks (host) VALUES ('elsewhere')")
        refused(wconn, "DELETE FROM queue_engine.worker_parks")
        refused(wconn, "UPDATE queue_engine.worker_parks SET queue = NULL")
    row = conn.execute(
        "SELECT scale_limit, rate_limit, rate_burst, paused FROM queue_engine.queues "
        "WHERE name = 'rr'"
    ).fetchone()
    assert row == (None, 5.0, 2, False)
    assert conn.execute("SELECT count(*) FROM queue_engine.worker_parks").fetchone() == (1,)


def test_monitor_reads_parks_and_controls(role_dsns, conn: psycopg.Connection[Any]) -> None:
    from queue_engine.operator.controls import controls

    conn.execute("INSERT INTO queue_engine.worker_parks (host) VALUES ('h-mon')")
    conn.execute("INSERT INTO queue_engine.queues (name, scale_limit) VALUES ('rm', 2)")
    with psycopg.connect(role_dsns["monitor"], autocommit=True) as mconn:
        assert mconn.execute("SELECT host FROM queue_engine.worker_parks").fetchall() == [
            ("h-mon",)
        ]
        view = controls(mconn, SCHEMA)
        assert [(p.kind, p.host) for p in view.parks] == [("host", "h-mon")]
        assert [(q.queue, q.scale_limit) for q in view.queues] == [("rm", 2)]
        (rm,) = stats.queue_stats(mconn, SCHEMA)
        assert (rm.queue, rm.scale_limit) == ("rm", 2)
        refused(mconn, "INSERT INTO queue_engine.worker_parks (host) VALUES ('x')")
        refused(mconn, "SELECT queue_engine.take_rate_tokens('rm', 1)")


def test_only_the_owner_gives_jobs_back(role_dsns, conn: psycopg.Connection[Any]) -> None:
    """Schema version 5: give_back_jobs (the reaper's and fast recovery's) is the orchestrator's."""
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task) VALUES ('rg', 'roles.back') RETURNING id"
    ).fetchone()
    assert row is not None
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w-g', "
        "started_at = now(), lease_expires_at = now() WHERE id = %s",
        (row[0],),
    )
    give_back = (
        "SELECT id, status FROM queue_engine.give_back_jobs("
        "ARRAY[%s]::bigint[], ARRAY['test']::text[], 'reaped', '', 'queue_engine.jobs')"
    )
    for kind in ("worker", "producer", "monitor"):
        with psycopg.connect(role_dsns[kind], autocommit=True) as rconn:
            refused(rconn, give_back, row[0])
    assert conn.execute(give_back.encode(), (row[0],)).fetchall() == [(row[0], "queued")]


def test_producer_and_monitor_read_archived_jobs_but_not_the_archive_itself(
    role_dsns, conn: psycopg.Connection[Any]
) -> None:
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, result, started_at, "
        "finished_at) VALUES ('ra', 'roles.done', 'succeeded', 1, '{\"ok\": 1}', "
        "now() - interval '20 minutes', now() - interval '10 minutes') RETURNING id"
    ).fetchone()
    assert row is not None
    job_id = int(row[0])
    assert archive_once(conn, SCHEMA, 60.0, Cursor()).moved == 1
    with Client(role_dsns["producer"]) as producer:
        job = producer.get(job_id)
        assert job.status == "succeeded" and job.result == {"ok": 1}
        assert [j.id for j in producer.list(queue="ra")] == [job_id]
    with psycopg.connect(role_dsns["monitor"], autocommit=True) as mon:
        assert [q.queue for q in stats.queue_stats(mon, SCHEMA)] == ["ra"]
        refused(mon, "SELECT count(*) FROM queue_engine.jobs_archive")
        refused(mon, "DELETE FROM queue_engine.jobs_archive")
    with psycopg.connect(role_dsns["producer"], autocommit=True) as prod:
        refused(prod, "DELETE FROM queue_engine.jobs_archive")
        refused(prod, "INSERT INTO queue_engine.jobs_archive (id, task) VALUES (1, 'x')")


def _publish_and_enqueue(role_dsns: dict[str, str], task: str) -> tuple[Any, ...]:
    """The worker role publishes ``task``'s defaults, the producer role enqueues it, SQL too."""
    with psycopg.connect(role_dsns["worker"], autocommit=True) as wconn:
        store.register(wconn, SCHEMA, worker_id="w-pub", queue="rp", host="h", pid=1, state="idle")
        definition = TaskDefinition(name=task, handler=print, queue="rp", max_attempts=2)
        assert (
            publish(wconn, SCHEMA, [definition], worker_id="w-pub", host="h", pid=1, app="a") == 1
        )
    with Client(role_dsns["producer"]) as producer:
        job = producer.enqueue(task)
    with psycopg.connect(role_dsns["producer"], autocommit=True) as pconn:
        by_sql = pconn.execute(
            "INSERT INTO queue_engine.jobs (task) VALUES (%s) RETURNING queue, max_attempts",
            (task,),
        ).fetchone()
        refused(pconn, "UPDATE queue_engine.task_defaults SET max_attempts = 9")
    with psycopg.connect(role_dsns["monitor"], autocommit=True) as mconn:
        assert [t.task for t in read(mconn, SCHEMA, dead_after_s=60)] == [task]
        refused(mconn, "DELETE FROM queue_engine.task_publications")
    return (job.queue, job.max_attempts, *(by_sql or ()))


def test_the_worker_publishes_its_tasks_and_the_producer_enqueues_with_them(role_dsns) -> None:
    """Schema version 28: publishing is the worker's; an enqueue reads what was published."""
    assert _publish_and_enqueue(role_dsns, "roles.published") == ("rp", 2, "rp", 2)


def test_roles_made_before_migration_28_are_granted_by_it(role_dsns, dsn: str, conn) -> None:
    # As on a deployment whose roles were made before 0028: none of its grants.
    groups = ", ".join(GROUPS.values())
    conn.execute(
        f"REVOKE ALL ON queue_engine.task_defaults, queue_engine.task_publications FROM {groups}"
    )
    Migrator(dsn).down(27)
    Migrator(dsn).up()
    assert _publish_and_enqueue(role_dsns, "roles.migrated") == ("rp", 2, "rp", 2)


def test_a_worker_that_may_not_publish_says_so_and_works(
    role_dsns, client, conn, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker role without 0028's grants (made before it, never granted since) still runs."""
    from support.workers import running_worker, wait_until

    conn.execute(
        f"REVOKE ALL ON queue_engine.task_defaults, queue_engine.task_publications "
        f"FROM {GROUPS['worker']}"
    )
    tasks = TaskRegistry()
    tasks.register(TaskDefinition(name="roles.echo", handler=lambda args: args, queue="rnp"))
    job = client.enqueue("roles.echo", queue="rnp", args={"n": 1})
    with (
        caplog.at_level(logging.WARNING, logger="queue_engine.worker"),
        running_worker(role_dsns["worker"], tasks=tasks, queue="rnp"),
    ):
        wait_until(lambda: client.get(job.id).status == "succeeded", what="the job's run")
    [warning] = [r for r in caplog.records if "worker.tasks_not_published" in r.getMessage()]
    assert "permission denied" in warning.getMessage()
    assert conn.execute("SELECT count(*) FROM queue_engine.task_defaults").fetchone() == (0,)


def test_dataloader_routes_run_on_the_producer_and_monitor_roles(
    dsn: str, role_dsns: dict[str, str], conn: psycopg.Connection[Any]
) -> None:
    """``--compat dataloader`` with the role DSNs: a trigger on the producer role, status on the monitor's.

    The producer role writes no event, so a trigger with a ``consumer_group``
    (kept as an event) is refused whole (403, no job) until it is granted
    ``INSERT ON job_events``, as the web guide says.
    """
    from support.web import PRODUCER, READ, is_problem, web_client

    with web_client(
        dsn,
        compat="dataloader",
        producer_dsn=role_dsns["producer"],
        read_dsn=role_dsns["monitor"],
    ) as api:
        keyed = {"task": "roles.dl", "idempotency_key": "dl-1"}
        r = api.post("/api/v1/jobs/trigger", json=keyed, headers=PRODUCER)
        assert r.status_code == 200, r.text
        # The existing job: its old id looked up in imported_ids, on the producer role.
        again = api.post("/api/v1/jobs/trigger", json=keyed, headers=PRODUCER)
        assert again.status_code == 200 and again.json() == r.json()
        status = api.get(f"/api/v1/jobs/{r.json()['job_id']}/status", headers=READ)
        assert status.status_code == 200 and status.json()["status"] == "queued"
        grouped = {"task": "roles.dl", "consumer_group": "g"}
        is_problem(api.post("/api/v1/jobs/trigger", json=grouped, headers=PRODUCER), 403)
        assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone() == (1,)
        conn.execute(f"GRANT INSERT ON queue_engine.job_events TO {GROUPS['producer']}")
        r = api.post("/api/v1/jobs/trigger", json=grouped, headers=PRODUCER)
        assert r.status_code == 200, r.text


def test_the_monitor_reads_the_audit_of_controls_and_writes_none(
    role_dsns, conn: psycopg.Connection[Any]
) -> None:
    """Schema version 34: control_events is read by the monitor, written by the owner only."""
    from queue_engine.operator.audit import Actor, list_control_events
    from queue_engine.operator.controls import pause_queue

    pause_queue(conn, SCHEMA, "aud", by=Actor("ops", "cli"))
    with psycopg.connect(role_dsns["monitor"], autocommit=True) as mconn:
        assert [(e.control, e.actor) for e in list_control_events(mconn, SCHEMA)] == [
            ("pause", "ops")
        ]
        refused(
            mconn,
            "INSERT INTO queue_engine.control_events (control, target, actor, via) "
            "VALUES ('pause', 'x', 'me', 'sql')",
        )
        refused(mconn, "DELETE FROM queue_engine.control_events")
    with psycopg.connect(role_dsns["worker"], autocommit=True) as wconn:
        refused(wconn, "SELECT * FROM queue_engine.control_events")


def test_roles_made_before_migration_34_may_read_the_audit_after_it(
    role_dsns, dsn: str, conn: psycopg.Connection[Any]
) -> None:
    # As on a deployment whose roles were made before 0034: the table is new to them.
    Migrator(dsn).down(33)
    Migrator(dsn).up()
    with psycopg.connect(role_dsns["monitor"], autocommit=True) as mconn:
        assert mconn.execute("SELECT count(*) FROM queue_engine.control_events").fetchone() == (0,)
    with psycopg.connect(role_dsns["producer"], autocommit=True) as pconn:
        refused(pconn, "SELECT count(*) FROM queue_engine.control_events")
