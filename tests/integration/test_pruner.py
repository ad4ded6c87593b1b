"""Contract of retention (``queue_engine.orchestrator.pruner``, ``sql/prune_*.sql``).

Finished jobs older than their status's retention are deleted with their
events, in statements of at most ``batch_size`` jobs and runs of at most
``max_batches`` statements (round robin over the retention groups, ``more``
set when work is left); jobs within retention, queued and running jobs and
rows locked by someone else are kept; stale worker rows go unless a running
job still names them; a dry run counts the same rows and deletes nothing.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
from support.history import finished_jobs

from queue_engine.cli.ctl import main
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.pruner import Pruner, Retention, prune_dry_run, prune_once

SCHEMA = "queue_engine"


def active_jobs(conn: psycopg.Connection[Any]) -> list[int]:
    """Old queued and running jobs (created 60 days ago): never pruned."""
    ids = []
    for status in ("queued", "running"):
        row = conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, status, attempt, created_at, "
            "available_at, started_at, claimed_by) VALUES ('q', 'old.active', %s, %s, "
            "now() - interval '60 days', now() - interval '60 days', "
            "CASE WHEN %s = 'running' THEN now() - interval '59 days' END, "
            "CASE WHEN %s = 'running' THEN 'w-owner' END) RETURNING id",
            (status, int(status == "running"), status, status),
        ).fetchone()
        assert row is not None
        ids.append(int(row[0]))
    return ids


def count(conn: psycopg.Connection[Any], sql: str, *params: Any) -> int:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


def remaining(conn: psycopg.Connection[Any], ids: list[int]) -> int:
    return count(conn, "SELECT count(*) FROM queue_engine.jobs WHERE id = ANY(%s)", ids)


def events_of(conn: psycopg.Connection[Any], ids: list[int]) -> int:
    return count(conn, "SELECT count(*) FROM queue_engine.job_events WHERE job_id = ANY(%s)", ids)


def test_prune_batches_respect_retention_per_status_and_delete_events(conn, dsn) -> None:
    old_ok = finished_jobs(conn, "succeeded", 25, "8 days")
    new_ok = finished_jobs(conn, "succeeded", 5, "1 day")
    old_failed = finished_jobs(conn, "failed", 3, "31 days")
    young_failed = finished_jobs(conn, "failed", 2, "10 days")
    old_lost = finished_jobs(conn, "lost", 1, "31 days")
    old_canceled = finished_jobs(conn, "canceled", 1, "31 days")
    active = active_jobs(conn)
    kept = new_ok + young_failed + active

    dry = prune_dry_run(conn, SCHEMA, Retention())
    assert dry.jobs == {"succeeded": 25, "failed": 3, "lost": 1, "canceled": 1}
    assert dry.events == 60 and dry.dry_run
    assert remaining(conn, old_ok) == 25  # nothing deleted by the dry run

    # Two statements of 10: one per retention group (round robin), work left.
    first = prune_once(conn, SCHEMA, Retention(), batch_size=10, max_batches=2)
    assert first.batches == 2
    assert first.jobs == {"succeeded": 10, "failed": 3, "lost": 1, "canceled": 1}
    assert first.events == 30
    assert first.more
    assert remaining(conn, old_ok) == 15
    assert remaining(conn, old_failed + old_lost + old_canceled) == 0
    # The oldest finished go first.
    assert remaining(conn, old_ok[:10]) == 0

    # The service's run finishes the backlog in two more statements.
    metrics.reset_counters()
    pruner = Pruner(dsn, SCHEMA, retention=Retention(), batch_size=10, max_batches=20)
    try:
        second = pruner.run_once()
    finally:
        pruner.stop()
    assert second.jobs == {"succeeded": 15}
    # 10, 5 (short: done), and one empty batch each for the other jobs group, the
    # archive (succeeded jobs moved out by the archiver, migration 0027) and the
    # two workflow groups (succeeded 7 days; failed and canceled 30 days).
    assert second.batches == 6
    assert not second.more
    assert pruner.next_interval(second) == pruner.interval_s
    assert pruner.next_interval(first) == pruner.catch_up_s
    assert metrics.counters()["pruned_jobs"] == 15
    assert metrics.counters()["pruned_events"] == 30

    deleted = old_ok + old_failed + old_lost + old_canceled
    assert remaining(conn, deleted) == 0 and events_of(conn, deleted) == 0
    assert remaining(conn, kept) == len(kept)
    assert events_of(conn, new_ok + young_failed) == 2 * len(new_ok + young_failed)
    assert not prune_once(conn, SCHEMA, Retention()).did_work


def test_prune_skips_locked_rows_and_zero_retention_keeps_forever(conn, dsn) -> None:
    ids = finished_jobs(conn, "succeeded", 3, "8 days")
    failed = finished_jobs(conn, "failed", 2, "100 days")
    holder = psycopg.connect(dsn)
    try:
        holder.execute("SELECT 1 FROM queue_engine.jobs WHERE id = %s FOR UPDATE", (ids[0],))
        done = threading.Event()
        result = None

        def run() -> None:
            nonlocal result
            result = prune_once(conn, SCHEMA, Retention(failed_s=0), batch_size=100)
            done.set()

        t = threading.Thread(target=run)
        t.start()
        assert done.wait(10), "prune waited on a locked row"
        t.join()
    finally:
        holder.rollback()
        holder.close()
    assert result is not None and result.jobs == {"succeeded": 2}
    assert remaining(conn, ids) == 1
    assert remaining(conn, failed) == 2  # failed retention 0: kept forever


def test_stale_worker_rows_are_pruned_unless_a_running_job_names_them(conn) -> None:
    def worker(wid: str, beat: str, stopped: bool) -> None:
        conn.execute(
            "INSERT INTO queue_engine.workers (id, queue, host, pid, heartbeat_at, stopped_at) "
            "VALUES (%s, 'q', 'h', 1, now() - %s::interval, "
            "CASE WHEN %s THEN now() - %s::interval END)",
            (wid, beat, stopped, beat),
        )

    worker("stopped-old", "2 days", True)
    worker("crashed-old", "3 days", False)
    worker("w-owner", "3 days", False)  # still named by a running job
    worker("stopped-recent", "1 hour", True)
    worker("live", "1 second", False)
    active_jobs(conn)
    dry = prune_dry_run(conn, SCHEMA, Retention())
    assert dry.workers == 2
    result = prune_once(conn, SCHEMA, Retention())
    assert result.workers == 2
    left = {r[0] for r in conn.execute("SELECT id FROM queue_engine.workers").fetchall()}
    assert left == {"w-owner", "stopped-recent", "live"}


def test_queue_ctl_prune_dry_run_and_older_than(conn, dsn, capsys) -> None:
    finished_jobs(conn, "succeeded", 4, "2 days")
    finished_jobs(conn, "failed", 1, "2 days")

    def run(*args: str) -> tuple[int, str]:
        try:
            main(["--dsn", dsn, "prune", *args])
        except SystemExit as exc:
            return int(exc.code or 0), capsys.readouterr().out
        raise AssertionError("main() did not exit")

    code, out = run("--dry-run")
    assert code == 0 and out.startswith("would delete 0 jobs"), out
    code, out = run("--dry-run", "--older-than", "1d")
    assert code == 0 and "would delete 5 jobs (failed 1, succeeded 4), 10 events" in out, out
    code, out = run("--older-than", "1d", "--batch-size", "2", "--json")
    assert code == 0, out
    # 2, 2, 1 jobs, and one empty batch each of the archive and the workflow group.
    assert '"jobs": 5' in out and '"batches": 5' in out, out
    assert count(conn, "SELECT count(*) FROM queue_engine.jobs") == 0
