"""Worker recycling with real ``queue-claim-worker`` processes: exit 79, nothing lost.

Each limit ends the process between jobs with exit code 79 after logging
``worker.recycle``; the running job finishes, prefetched jobs that did not
start go back to ``queued`` with their attempt not spent, and a restarted
worker (the test plays the supervisor) finishes the rest.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
from support.workers import (
    all_in,
    create_log_table,
    kill_all,
    spawn_worker,
    statuses,
    stop_process,
    wait_until,
)

from queue_engine import Client
from queue_engine.foundation.exit_codes import ExitCode

Q = "wt"
Conn = psycopg.Connection[tuple[object, ...]]


def _exit_code(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    wait_until(lambda: proc.poll() is not None, timeout=timeout, what="the worker exited")
    return proc.wait()


def _count(conn: Conn, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return int(str(row[0]))


def _nothing_running_and_no_attempt_spent_on_queued(conn: Conn) -> None:
    assert _count(conn, "SELECT count(*) FROM queue_engine.jobs WHERE status = 'running'") == 0
    spent = "SELECT count(*) FROM queue_engine.jobs WHERE status = 'queued' AND attempt <> 0"
    assert _count(conn, spent) == 0


def _recycle_lines(log_file: Path) -> list[str]:
    return [line for line in log_file.read_text().splitlines() if "worker.recycle" in line]


def test_max_jobs_recycles_after_n_jobs_and_restarts_finish_the_queue(
    dsn: str, client: Client, conn: Conn, tmp_path: Path
) -> None:
    ids = client.enqueue_many([{"task": "echo", "queue": Q, "args": {"i": i}} for i in range(10)])
    procs: list[subprocess.Popen[bytes]] = []
    done_per_run: list[int] = []
    try:
        # The test is the supervisor: restart the worker on 79, as systemd does.
        for run in range(3):
            log_file = tmp_path / f"worker-{run}.log"
            proc = spawn_worker(dsn, "--max-jobs", "3", "--prefetch", "2", log_file=log_file)
            procs.append(proc)
            code = _exit_code(proc)
            assert code == ExitCode.RECYCLE, log_file.read_text()
            done = _count(conn, "SELECT count(*) FROM queue_engine.jobs WHERE status='succeeded'")
            done_per_run.append(done)
            _nothing_running_and_no_attempt_spent_on_queued(conn)
            [line] = _recycle_lines(log_file)
            assert "reason=max_jobs" in line and "limit=3" in line and "value=3" in line
            assert "worker.stopped" in log_file.read_text()
        assert done_per_run == [3, 6, 9]
        # The claims never exceeded the jobs left to run: nothing was given back.
        assert (
            _count(conn, "SELECT count(*) FROM queue_engine.job_events WHERE kind = 'released'")
            == 0
        )
        # The fourth run finishes the last job and keeps waiting: a stop now is a 0.
        procs.append(spawn_worker(dsn, "--max-jobs", "3", "--prefetch", "2"))
        wait_until(all_in(dsn, {"succeeded"}), what="every job succeeded")
        assert stop_process(procs[-1]) == ExitCode.OK
    finally:
        kill_all(procs)
    assert set(statuses(dsn)) == set(ids)
    # Every job ran once: one attempt each, nothing retried.
    assert _count(conn, "SELECT count(*) FROM queue_engine.jobs WHERE attempt <> 1") == 0


def test_max_rss_recycles_after_the_first_job_and_gives_back_the_prefetched(
    dsn: str, client: Client, conn: Conn, tmp_path: Path
) -> None:
    ids = client.enqueue_many([{"task": "echo", "queue": Q, "args": {"i": i}} for i in range(3)])
    log_file = tmp_path / "worker.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        # 1 MiB: every Python process is above it, but never before its first job.
        procs.append(spawn_worker(dsn, "--max-rss", "1", "--prefetch", "2", log_file=log_file))
        assert _exit_code(procs[0]) == ExitCode.RECYCLE, log_file.read_text()
        current = statuses(dsn)
        assert sorted(current.values()) == ["queued", "queued", "succeeded"]
        _nothing_running_and_no_attempt_spent_on_queued(conn)
        # The second job was prefetched with the first and given back, not run.
        released = _count(
            conn, "SELECT count(*) FROM queue_engine.job_events WHERE kind = 'released'"
        )
        assert released == 1
        [line] = _recycle_lines(log_file)
        assert "reason=max_rss_mb" in line and "jobs=1" in line and "prefetched=1" in line
        # Another worker, without the limit, finishes them.
        procs.append(spawn_worker(dsn))
        wait_until(all_in(dsn, {"succeeded"}), what="every job succeeded")
        assert stop_process(procs[-1]) == ExitCode.OK
    finally:
        kill_all(procs)
    assert set(statuses(dsn)) == set(ids)
    assert _count(conn, "SELECT count(*) FROM queue_engine.jobs WHERE attempt <> 1") == 0


def test_max_age_recycles_after_the_current_job(
    dsn: str, client: Client, conn: Conn, tmp_path: Path
) -> None:
    create_log_table(dsn)
    first, second = client.enqueue_many(
        [{"task": "record", "queue": Q, "args": {"sleep": 2.5, "what": f"j{i}"}} for i in range(2)]
    )
    log_file = tmp_path / "worker.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(spawn_worker(dsn, "--max-age", "1s", "--prefetch", "2", log_file=log_file))
        assert _exit_code(procs[0]) == ExitCode.RECYCLE, log_file.read_text()
        # The age was reached while the first job ran: it finished, then the worker left.
        current = statuses(dsn)
        assert current[first] == "succeeded"
        assert current[second] == "queued"
        _nothing_running_and_no_attempt_spent_on_queued(conn)
        ran = conn.execute("SELECT job_id FROM worker_test_log").fetchall()
        assert ran == [(first,)]
        [line] = _recycle_lines(log_file)
        assert "reason=max_age_s" in line and "jobs=1" in line and "prefetched=1" in line
        procs.append(spawn_worker(dsn))
        wait_until(all_in(dsn, {"succeeded"}), what="every job succeeded")
        assert stop_process(procs[-1]) == ExitCode.OK
    finally:
        kill_all(procs)


def test_an_idle_worker_recycles_on_age(dsn: str, tmp_path: Path) -> None:
    log_file = tmp_path / "worker.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(spawn_worker(dsn, "--max-age", "1", log_file=log_file))
        assert _exit_code(procs[0]) == ExitCode.RECYCLE, log_file.read_text()
    finally:
        kill_all(procs)
    [line] = _recycle_lines(log_file)
    assert "reason=max_age_s" in line and "jobs=0" in line
