"""The worker's hot path costs one statement per job, counted on its own connection.

At steady state the outcome of the job just run is sent by the same statement
that claims the next one (``finish_and_claim_jobs.sql``): draining N jobs
costs N + 1 statements (the first claim, then one finish-and-claim per job).
The count is taken client-side, on the worker's connection only: every
``execute`` psycopg runs on it, and each statement sent through libpq without a
cursor (the worker's session is autocommit, so each is also one commit),
whatever module issued it. Recycling limits (checked
between jobs, in the process) add no statement.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from support.workers import running_worker, statuses, wait_until

from queue_engine import Client
from queue_engine.foundation.db import CursorKeepingConnection
from queue_engine.worker import connection as worker_connection

Q = "wt"
JOBS = 50


class CountingConnection(CursorKeepingConnection):
    """Counts the statements executed on it: cursor ``execute`` calls (kept cursors
    included) and the finish-and-claim statement, which the worker sends through
    libpq without a cursor (``psycopg.generators.execute``, worker/prepared.py).

    A :class:`CursorKeepingConnection`, as the worker's session is, so its
    statements run on the kept cursor they use in production.
    """

    executes = 0
    _count_lock = threading.Lock()

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        code = getattr(gen, "gi_code", None)
        if code is not None and code.co_name in ("_execute_gen", "execute"):
            with self._count_lock:
                self.executes += 1
        return super().wait(gen, interval=interval, timeout=timeout)


#: Recycling limits far away: checked between every two jobs, never reached.
FAR_LIMITS = {"max_jobs": 10**6, "max_rss_mb": 10**6, "max_age_s": 10**6}


@pytest.mark.parametrize("limits", [{}, FAR_LIMITS], ids=["plain", "recycling_limits"])
def test_draining_jobs_costs_one_statement_per_job(
    dsn: str, client: Client, monkeypatch: pytest.MonkeyPatch, limits: dict[str, int]
) -> None:
    opened: list[CountingConnection] = []

    def counting_connect(dsn: str, **kwargs: Any) -> CountingConnection:
        kwargs.pop("connection_class")  # the worker asks for a CursorKeepingConnection: this is one
        kwargs.setdefault("autocommit", True)
        conn = CountingConnection.connect(dsn, **kwargs)
        opened.append(conn)
        return conn

    monkeypatch.setattr(worker_connection, "connect", counting_connect)

    def executed() -> int:
        return sum(c.executes for c in opened)

    # No idle polls and no heartbeat during the drain: what is left is the hot path.
    with running_worker(dsn, poll_s=30.0, heartbeat_s=10.0, **limits) as worker:
        warm_up = client.enqueue("echo", queue=Q, args={"warm": True}).id
        wait_until(lambda: worker.jobs_done == 1, what="warm-up job finished")
        assert statuses(dsn)[warm_up] == "succeeded"
        before = executed()
        client.enqueue_many([{"task": "echo", "queue": Q, "args": {"i": i}} for i in range(JOBS)])
        wait_until(lambda: worker.jobs_done == 1 + JOBS, timeout=60, what="jobs drained")
        statements = executed() - before
    assert len(opened) == 1, "the worker reconnected during the test"
    assert set(statuses(dsn).values()) == {"succeeded"}
    # One claim after the wake-up, then one finish-and-claim per job; a heartbeat
    # or a controls re-read may fall into the window on a slow machine.
    assert JOBS <= statements <= JOBS + 4, f"{statements} statements for {JOBS} jobs"
