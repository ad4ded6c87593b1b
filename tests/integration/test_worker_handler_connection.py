"""The handler's own connection (``ctx.connect()``): one small pool per worker process.

Opening a connection per job cost a connect (a server process, TLS, auth) for
every job that touches the database; the worker now lends the handler a
connection from a pool of its own, returned after each job.
"""

from __future__ import annotations

from support.workers import all_in, running_worker, statuses, wait_until

from queue_engine import Client

Q = "wt"


def test_jobs_of_one_worker_share_one_handler_session(dsn: str, client: Client, conn) -> None:
    ids = [client.enqueue("backend_pid", queue=Q, priority=i).id for i in range(4)]
    with running_worker(dsn) as worker:
        wait_until(all_in(dsn, {"succeeded", "failed"}), what="jobs finished")
        worker_pid = conn.execute(
            "SELECT backend_pid FROM queue_engine.workers WHERE id = %s", (worker.worker_id,)
        ).fetchone()
    assert set(statuses(dsn).values()) == {"succeeded"}
    results = [
        conn.execute("SELECT result FROM queue_engine.jobs WHERE id = %s", (i,)).fetchone()[0]
        for i in ids
    ]
    pids = {r["pid"] for r in results}
    assert len(pids) == 1, f"each job got a new handler connection: {results}"
    # Not the worker's own session (which may run with synchronous_commit = off).
    assert worker_pid is not None and worker_pid[0] not in pids
    # Each job finds the session as a new one would be: what the last job left
    # (a setting, an advisory lock) is gone, and its prepared statements still work.
    default_timeout = conn.execute("SELECT current_setting('statement_timeout')").fetchone()
    assert default_timeout is not None
    assert [r["statement_timeout"] for r in results] == [default_timeout[0]] * len(ids)
    assert [r["advisory"] for r in results] == [0] * len(ids)
    attempts = conn.execute("SELECT DISTINCT attempt FROM queue_engine.jobs").fetchall()
    assert attempts == [(1,)]
