"""Operator controls end to end: ``queue-ctl`` commands steering real worker processes.

Three ``queue-claim-worker`` processes on one queue; ``queue-ctl scale wt 1``
leaves one claiming and parks the others (no two handlers ever overlap), and
``queue-ctl stop --host H --queue wt`` makes every one of them exit 0 on its
own, the busy one after its current job, with no job left running.
``queue-ctl stop --now`` does not wait for a ten-minute job: the worker gives
it back (queued, attempt not counted) and exits 0.
"""

from __future__ import annotations

import itertools
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from support.ctl import ok, queue_ctl
from support.workers import create_log_table, kill_all, spawn_worker, wait_until

from queue_engine import Client

S = "queue_engine"


def worker_states(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        f"SELECT state FROM {S}.workers WHERE role = 'worker' AND stopped_at IS NULL"
    ).fetchall()
    return sorted(r[0] for r in rows)


def test_scale_then_stop_steer_worker_processes(
    dsn: str, client: Client, conn: psycopg.Connection[Any]
) -> None:
    create_log_table(dsn)
    procs = [spawn_worker(dsn) for _ in range(3)]
    try:
        wait_until(lambda: worker_states(conn) == ["idle"] * 3, timeout=60, what="3 idle workers")
        assert "wt" in ok(queue_ctl("--dsn", dsn, "scale", "wt", "1"))
        wait_until(
            lambda: worker_states(conn) == ["idle", "parked", "parked"],
            what="one claiming worker, two parked",
        )
        # A backlog long enough (8 s of work for the one claiming worker) that the
        # stop always lands before its end, even on a loaded machine.
        ids = [client.enqueue("record", queue="wt", args={"sleep": 0.4}).id for _ in range(20)]
        wait_until(
            lambda: conn.execute("SELECT count(*) FROM worker_test_log").fetchone()[0] >= 3,
            what="three jobs done",
        )
        ok(queue_ctl("--dsn", dsn, "stop", "--host", socket.gethostname(), "--queue", "wt"))
        codes = [proc.wait(30) for proc in procs]
        assert codes == [0, 0, 0]
    finally:
        kill_all(procs)
    statuses = dict(
        conn.execute(f"SELECT id, status FROM {S}.jobs WHERE id = ANY(%s)", (ids,)).fetchall()
    )
    assert set(statuses.values()) <= {"succeeded", "queued"}  # none left running
    assert "queued" in statuses.values()  # stopped before the backlog was done
    intervals = conn.execute(
        "SELECT started, ended FROM worker_test_log ORDER BY started"
    ).fetchall()
    assert len(intervals) == list(statuses.values()).count("succeeded")
    # Scale 1: each handler ended before the next one started.
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(intervals))
    stopped = conn.execute(
        f"SELECT count(*) FROM {S}.workers WHERE role = 'worker' AND state = 'stopped'"
        " AND stop_requested_at IS NOT NULL"
    ).fetchone()
    assert stopped == (3,)


def running_job_and_worker(
    dsn: str, client: Client, conn: psycopg.Connection[Any], log: Path, heartbeat_s: str
) -> tuple[int, str, subprocess.Popen[bytes]]:
    """A worker running a ten-minute job: (job id, worker id, process)."""
    job_id = client.enqueue("sleepy", queue="wt", args={"sleep": 600}).id
    proc = spawn_worker(dsn, log_file=log, QUEUE_ENGINE_HEARTBEAT_S=heartbeat_s)
    try:
        wait_until(
            lambda: (
                conn.execute(f"SELECT status FROM {S}.jobs WHERE id = %s", (job_id,)).fetchone()
                == ("running",)
            ),
            timeout=60,
            what="the long job running",
        )
    except BaseException:
        kill_all([proc])
        raise
    row = conn.execute(
        f"SELECT id FROM {S}.workers WHERE role = 'worker' AND stopped_at IS NULL"
    ).fetchone()
    assert row is not None
    return job_id, row[0], proc


def assert_given_back_and_stopped(
    conn: psycopg.Connection[Any], job_id: int, worker_id: str, log: Path
) -> None:
    row = conn.execute(
        f"SELECT status, attempt, error FROM {S}.jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ("queued", 0, None)  # queued again, the attempt not counted
    kinds = conn.execute(
        f"SELECT kind FROM {S}.job_events WHERE job_id = %s ORDER BY id", (job_id,)
    ).fetchall()
    assert [k for (k,) in kinds] == ["claimed", "given_back"]
    text = log.read_text()
    assert "worker.stop_now" in text and "stop --now" in text
    state = conn.execute(
        f"SELECT state, stop_now FROM {S}.workers WHERE id = %s", (worker_id,)
    ).fetchone()
    assert state == ("stopped", True)


@pytest.mark.serial  # a bound on the exit time: no test process beside it
def test_stop_now_gives_the_running_job_back_within_a_heartbeat_and_exits_0(
    dsn: str, client: Client, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    # The default 10 s heartbeat; the job would run for ten minutes.
    job_id, worker_id, proc = running_job_and_worker(dsn, client, conn, log, "10")
    try:
        asked = time.monotonic()  # the bound includes queue-ctl's own start-up
        out = ok(queue_ctl("--dsn", dsn, "stop", "--now", "--worker", worker_id))
        assert "gives its running job back at once" in out
        code = proc.wait(60)
        elapsed = time.monotonic() - asked
    finally:
        kill_all([proc])
    print(f"stop --now to exit: {elapsed:.2f}s")
    assert code == 0, log.read_text()
    assert elapsed < 10, "the hard stop must not wait longer than one heartbeat"
    assert_given_back_and_stopped(conn, job_id, worker_id, log)


def test_a_stop_now_whose_notify_was_missed_is_read_back_by_the_heartbeat(
    dsn: str, client: Client, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """The flag on the row is what counts: written without a NOTIFY, the next beat finds it."""
    log = tmp_path / "worker.log"
    job_id, worker_id, proc = running_job_and_worker(dsn, client, conn, log, "1")
    try:
        conn.execute(
            f"UPDATE {S}.workers SET stop_requested_at = now(), stop_now = true WHERE id = %s",
            (worker_id,),
        )
        code = proc.wait(60)
    finally:
        kill_all([proc])
    assert code == 0, log.read_text()
    assert_given_back_and_stopped(conn, job_id, worker_id, log)
