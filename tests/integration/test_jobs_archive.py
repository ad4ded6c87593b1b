"""Contract of the archive (migration 0027, ``orchestrator/archiver.py``, ``sql/archive_jobs.sql``).

Succeeded jobs outside workflows and without an idempotency key move from
``jobs`` to ``jobs_archive`` once they finished ``after_s`` ago, oldest first,
in bounded batches; everything else stays. A moved job reads exactly as before
through every reader (``get``, the lists, the dashboard, stats), keeps its
events, and is pruned after the succeeded retention. The scan's cursor never
stalls on rows that stay, a row someone holds is skipped and picked up by a
rescan, and migrating down puts archived jobs back.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from support.history import finished_jobs

from queue_engine import Client, Workflow
from queue_engine.daemon.service import Timing
from queue_engine.foundation.errors import InvalidTransition, JobNotFound
from queue_engine.foundation.migrate import Migrator
from queue_engine.operator import stats
from queue_engine.orchestrator.archiver import Archiver, Cursor, archive_once
from queue_engine.orchestrator.pruner import Retention, prune_dry_run, prune_once
from queue_engine.web.pages.reads import JobFilters, get_job, list_jobs, search_window

SCHEMA = "queue_engine"


def finished(
    conn: psycopg.Connection[Any],
    status: str,
    n: int,
    age: str,
    *,
    key: str | None = None,
    queue: str = "arch",
) -> list[int]:
    """Finished jobs of this file's task (``support.history.finished_jobs``)."""
    return finished_jobs(conn, status, n, age, queue=queue, task="arch.task", key=key)


def where(conn: psycopg.Connection[Any], ids: list[int]) -> dict[str, int]:
    """How many of ``ids`` each table holds."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM queue_engine.jobs WHERE id = ANY(%(ids)s)),"
        " (SELECT count(*) FROM queue_engine.jobs_archive WHERE id = ANY(%(ids)s))",
        {"ids": ids},
    ).fetchone()
    assert row is not None
    return {"jobs": int(row[0]), "archive": int(row[1])}


def columns(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str, bool]]:
    return [
        (str(r[0]), str(r[1]), bool(r[2]))
        for r in conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            (table,),
        )
    ]


def test_the_archive_has_the_columns_of_jobs_in_the_same_order(conn) -> None:
    # A migration that adds a column to jobs must add it to jobs_archive and
    # recreate jobs_all; this fails until it does.
    jobs = columns(conn, "queue_engine.jobs")
    assert len(jobs) > 20
    assert columns(conn, "queue_engine.jobs_archive") == jobs
    assert [c[0] for c in columns(conn, "queue_engine.jobs_all")] == [c[0] for c in jobs]


def test_only_old_succeeded_plain_jobs_move_and_their_events_stay(conn, client) -> None:
    old_ok = finished(conn, "succeeded", 12, "10 minutes")
    recent_ok = finished(conn, "succeeded", 3, "10 seconds")
    failed = finished(conn, "failed", 2, "10 minutes")
    canceled = finished(conn, "canceled", 2, "10 minutes")
    lost = finished(conn, "lost", 1, "10 minutes")
    keyed = finished(conn, "succeeded", 2, "10 minutes", key="arch-key-")
    live = [client.enqueue("arch.task", queue="arch").id]
    before = {i: client.get(i) for i in old_ok}

    cursor = Cursor()
    result = archive_once(conn, SCHEMA, 60.0, cursor, batch_size=5, max_batches=10)

    assert result.moved == 12
    assert where(conn, old_ok) == {"jobs": 0, "archive": 12}
    for stays in (recent_ok, failed, canceled, lost, keyed, live):
        assert where(conn, stays) == {"jobs": len(stays), "archive": 0}
    # Every row finished over a minute ago was scanned once (12 + 2 + 2 + 1 + 2),
    # in batches of 5; the cursor ends on the last of them.
    assert result.scanned == 19 and result.batches == 4 and not result.more
    assert cursor.finished_at is not None
    # A moved job reads exactly as before, events included.
    for i in old_ok:
        assert client.get(i) == before[i]
    events = conn.execute(
        "SELECT count(*) FROM queue_engine.job_events WHERE job_id = ANY(%s)", (old_ok,)
    ).fetchone()
    assert events == (24,)
    # The next run starts after the cursor: nothing new to scan.
    again = archive_once(conn, SCHEMA, 60.0, cursor, batch_size=5)
    assert (again.moved, again.scanned) == (0, 0)


def test_a_workflow_node_is_never_archived(conn, client) -> None:
    wf = Workflow("arch-wf")
    wf.add("only", "arch.task", queue="arch")
    started = client.start_workflow(wf)
    node = conn.execute(
        "SELECT id FROM queue_engine.jobs WHERE workflow_id = %s", (started.id,)
    ).fetchone()
    assert node is not None
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w', "
        "started_at = now() - interval '1 hour' WHERE id = %s",
        (node[0],),
    )
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now() - interval '1 hour' "
        "WHERE id = %s",
        (node[0],),
    )
    result = archive_once(conn, SCHEMA, 60.0, Cursor())
    assert result.scanned == 1 and result.moved == 0
    assert where(conn, [int(node[0])]) == {"jobs": 1, "archive": 0}


def test_every_reader_sees_archived_jobs(conn, client) -> None:
    ids = finished(conn, "succeeded", 4, "10 minutes", queue="arch-read")
    failed = finished(conn, "failed", 1, "5 minutes", queue="arch-read")
    newest = client.enqueue("arch.task", queue="arch-read").id
    seen_before = [j.id for j in client.list(queue="arch-read")]
    stats_before = {s.queue: s for s in stats.queue_stats(conn, SCHEMA)}["arch-read"]

    assert archive_once(conn, SCHEMA, 60.0, Cursor()).moved == 4
    assert where(conn, ids)["archive"] == 4

    # Client.list (and the HTTP API's list), newest first across both tables.
    assert [j.id for j in client.list(queue="arch-read")] == seen_before
    assert seen_before == [newest, *failed, *reversed(ids)]
    assert [j.id for j in client.list(queue="arch-read", status="succeeded")] == ids[::-1]
    # The dashboard's jobs list and job page.
    filters = JobFilters(queue="arch-read")
    window = search_window(conn, SCHEMA, filters)
    assert [r.id for r in list_jobs(conn, SCHEMA, filters, window)] == seen_before
    shown = get_job(conn, SCHEMA, ids[0])
    assert shown is not None and shown.status == "succeeded" and shown.result == {"ok": 1}
    # queue-ctl stats / top / metrics: the finished figures count archived jobs.
    stats_after = {s.queue: s for s in stats.queue_stats(conn, SCHEMA)}["arch-read"]
    assert stats_after.succeeded_1h == stats_before.succeeded_1h == 4
    assert stats_after.out_15m == stats_before.out_15m == 5


def test_the_newest_job_can_be_archived_and_the_dashboard_still_starts_above_it(
    conn, client
) -> None:
    ids = finished(conn, "succeeded", 3, "10 minutes", queue="arch-top")
    assert archive_once(conn, SCHEMA, 60.0, Cursor()).moved == 3
    window = search_window(conn, SCHEMA, JobFilters())
    assert window.top == max(ids) + 1
    page = list_jobs(conn, SCHEMA, JobFilters(), window)
    assert [r.id for r in page][:3] == ids[::-1]


def test_ties_on_finished_at_never_stall_the_cursor(conn) -> None:
    # 25 canceled jobs finished at one instant (a bulk cancel), then 5 succeeded:
    # batches of 10 walk past the tie by id and move the 5.
    tied = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, created_at, finished_at) "
        "SELECT 'arch', 'arch.task', 'canceled', now() - interval '1 hour', "
        "now() - interval '30 minutes' FROM generate_series(1, 25) RETURNING id"
    ).fetchall()
    ok = finished(conn, "succeeded", 5, "10 minutes")
    result = archive_once(conn, SCHEMA, 60.0, Cursor(), batch_size=10, max_batches=10)
    assert result.moved == 5 and result.scanned == 30
    assert where(conn, ok)["archive"] == 5
    assert where(conn, [int(r[0]) for r in tied]) == {"jobs": 25, "archive": 0}


def test_a_held_row_is_skipped_and_a_rescan_moves_it(dsn, conn) -> None:
    ids = finished(conn, "succeeded", 3, "10 minutes")
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT 1 FROM queue_engine.jobs WHERE id = %s FOR UPDATE", (ids[1],))
        cursor = Cursor()
        assert archive_once(conn, SCHEMA, 60.0, cursor).moved == 2
        holder.rollback()
    # The cursor is past it: the next batch does not see it ...
    assert archive_once(conn, SCHEMA, 60.0, cursor).moved == 0
    # ... the service's rescan (clock injected) does.
    clock = [0.0]
    archiver = Archiver(
        dsn, SCHEMA, after_s=60.0, rescan_s=3600.0, timing=Timing(clock=lambda: clock[0])
    )
    try:
        archiver.cursor = cursor
        assert archiver.run_once().moved == 0
        clock[0] = 3600.0
        assert archiver.run_once().moved == 1
    finally:
        archiver.stop()
    assert where(conn, ids) == {"jobs": 0, "archive": 3}


def test_the_service_comes_back_soon_while_jobs_are_left(dsn, conn) -> None:
    finished(conn, "succeeded", 25, "10 minutes")
    archiver = Archiver(dsn, SCHEMA, after_s=60.0, batch_size=10, max_batches=2, interval_s=10)
    try:
        first = archiver.run_once()
        assert (first.moved, first.batches, first.more) == (20, 2, True)
        assert archiver.next_interval(first) == 1.0
        second = archiver.run_once()
        assert (second.moved, second.more) == (5, False)
        assert archiver.next_interval(second) == 10
    finally:
        archiver.stop()


def test_archiving_is_off_with_zero_and_refuses_a_bad_age(
    dsn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUE_ENGINE_ARCHIVE_AFTER_S", "0")
    assert Archiver.from_env(dsn, SCHEMA) is None
    monkeypatch.setenv("QUEUE_ENGINE_ARCHIVE_AFTER_S", "0.5")
    with pytest.raises(Exception, match="ARCHIVE_AFTER_S"):
        Archiver.from_env(dsn, SCHEMA)
    monkeypatch.setenv("QUEUE_ENGINE_ARCHIVE_AFTER_S", "120")
    monkeypatch.setenv("QUEUE_ENGINE_ARCHIVE_S", "5")
    archiver = Archiver.from_env(dsn, SCHEMA)
    assert archiver is not None and archiver.after_s == 120 and archiver.interval_s == 5
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        pytest.raises(ValueError, match="after_s"),
    ):
        archive_once(conn, SCHEMA, 0, Cursor())


def test_the_pruner_deletes_archived_jobs_after_the_succeeded_retention(conn) -> None:
    expired = finished(conn, "succeeded", 7, "8 days")
    kept = finished(conn, "succeeded", 3, "6 days")
    assert archive_once(conn, SCHEMA, 60.0, Cursor()).moved == 10
    result = prune_once(conn, SCHEMA, Retention(), batch_size=5)
    assert result.jobs == {"succeeded": 7} and result.events == 14
    assert where(conn, expired) == {"jobs": 0, "archive": 0}
    assert where(conn, kept) == {"jobs": 0, "archive": 3}
    events = conn.execute(
        "SELECT count(*) FROM queue_engine.job_events WHERE job_id = ANY(%s)", (expired,)
    ).fetchone()
    assert events == (0,)
    # Retention 0 keeps succeeded jobs forever, archived ones too.
    forever = prune_once(conn, SCHEMA, Retention(succeeded_s=0), now=None)
    assert forever.jobs == {} and where(conn, kept)["archive"] == 3


def test_migrating_down_puts_archived_jobs_back(dsn, conn, client) -> None:
    ids = finished(conn, "succeeded", 3, "10 minutes")
    before = {i: client.get(i) for i in ids}
    assert archive_once(conn, SCHEMA, 60.0, Cursor()).moved == 3
    Migrator(dsn).down(26)
    assert conn.execute("SELECT to_regclass('queue_engine.jobs_archive')").fetchone() == (None,)
    rows = conn.execute(
        "SELECT id, status, result FROM queue_engine.jobs WHERE id = ANY(%s) ORDER BY id", (ids,)
    ).fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(i, "succeeded", before[i].result) for i in ids]
    Migrator(dsn).up()
    assert client.get(ids[0]) == before[ids[0]]


def test_the_migration_lets_every_role_that_reads_jobs_read_jobs_all(dsn, conn) -> None:
    role = f"qe_t_arch_reader_{os.getpid()}"
    Migrator(dsn).down(26)
    conn.execute(f"CREATE ROLE {role}")
    try:
        conn.execute(f"GRANT SELECT ON queue_engine.jobs TO {role}")
        Migrator(dsn).up()
        row = conn.execute(
            "SELECT has_table_privilege(%s, 'queue_engine.jobs_all', 'SELECT'),"
            " has_table_privilege(%s, 'queue_engine.jobs_archive', 'SELECT')",
            (role, role),
        ).fetchone()
        # The view reads the archive with its owner's rights: no grant on the table.
        assert row == (True, False)
    finally:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_a_recently_succeeded_job_stays_until_after_s(conn) -> None:
    ids = finished(conn, "succeeded", 2, "30 seconds")
    now = conn.execute("SELECT now()").fetchone()
    assert now is not None
    assert archive_once(conn, SCHEMA, 60.0, Cursor(), now=now[0]).moved == 0
    later = now[0] + timedelta(seconds=31)
    assert archive_once(conn, SCHEMA, 60.0, Cursor(), now=later).moved == 2
    assert where(conn, ids)["archive"] == 2


def test_a_producer_client_reads_an_archived_job_by_id(dsn, conn) -> None:
    ids = finished(conn, "succeeded", 1, "10 minutes")
    archive_once(conn, SCHEMA, 60.0, Cursor())
    with Client(dsn) as producer:
        job = producer.get(ids[0])
    assert job.status == "succeeded" and job.result == {"ok": 1}


def test_cancel_and_retry_of_an_archived_job_are_refused_as_for_any_succeeded_job(
    conn, client
) -> None:
    ids = finished(conn, "succeeded", 1, "10 minutes")
    archive_once(conn, SCHEMA, 60.0, Cursor())
    assert where(conn, ids)["archive"] == 1
    with pytest.raises(InvalidTransition, match=r"already finished \(succeeded\)"):
        client.cancel(ids[0])
    with pytest.raises(InvalidTransition, match="succeeded"):
        client.retry(ids[0])
    with pytest.raises(JobNotFound):
        client.cancel(max(ids) + 1_000_000)


def test_a_dry_run_prune_counts_archived_jobs_with_those_still_in_jobs(conn) -> None:
    archived = finished(conn, "succeeded", 4, "8 days")
    assert archive_once(conn, SCHEMA, 60.0, Cursor()).moved == 4
    finished(conn, "succeeded", 2, "9 days", key="dry-")  # keyed: stays in jobs
    counted = prune_dry_run(conn, SCHEMA, Retention())
    assert counted.jobs == {"succeeded": 6} and counted.events == 12
    assert where(conn, archived)["archive"] == 4  # counted, not deleted
