"""How a running worker obeys the operator controls: park, unpark, scale, stop, warm keys.

The workers run in threads of the test process (``running_worker``) against
a real Postgres; controls are changed the way ``queue-ctl`` changes them, a
row or column plus a NOTIFY on ``<schema>.controls`` in one transaction. The
``queue-ctl`` commands themselves are tested in ``test_fleet_ctl.py``; the
cluster-wide limits under races in ``tests/test_invariant_scale_limit.py``.
"""

from __future__ import annotations

import socket
import time
from contextlib import ExitStack
from typing import Any

import psycopg
from support.workers import create_log_table, running_worker, wait_until

from queue_engine import Client
from queue_engine.worker import Worker

S = "queue_engine"
Q = "wt"
HOST = socket.gethostname()


def control(conn: psycopg.Connection[Any], statement: str, *params: Any, payload: str = Q) -> None:
    """Change a control and announce it, in one transaction, as queue-ctl does."""
    with conn.transaction():
        conn.execute(statement, params)  # type: ignore[arg-type]
        conn.execute("SELECT pg_notify(%s, %s)", (f"{S}.controls", payload))


def states(conn: psycopg.Connection[Any], workers: list[Worker]) -> list[str]:
    rows = dict(
        conn.execute(
            f"SELECT id, state FROM {S}.workers WHERE id = ANY(%s)",
            ([w.worker_id for w in workers],),
        ).fetchall()
    )
    return sorted(rows.get(w.worker_id, "?") for w in workers)


def status(client: Client, job_id: int) -> str:
    job = client.get(job_id)
    assert job is not None
    return job.status


def test_host_park_stops_claims_and_unpark_resumes_them(dsn: str, client: Client, conn) -> None:
    with running_worker(dsn) as worker:
        wait_until(lambda: states(conn, [worker]) == ["idle"], what="worker idle")
        control(
            conn,
            f"INSERT INTO {S}.worker_parks (host, queue) VALUES (%s, %s)",
            HOST,
            Q,
            payload="*",
        )
        wait_until(lambda: states(conn, [worker]) == ["parked"], what="worker parked")
        job_id = client.enqueue("echo", queue=Q).id
        # Parked: the job's NOTIFY and several polls (0.1 s) pass without a claim.
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert status(client, job_id) == "queued"
            time.sleep(0.1)
        control(conn, f"DELETE FROM {S}.worker_parks WHERE host = %s", HOST, payload="*")
        wait_until(lambda: status(client, job_id) == "succeeded", what="job run after unpark")
        wait_until(lambda: states(conn, [worker]) == ["idle"], what="worker idle again")


def test_worker_id_park_gives_back_prefetched_jobs(dsn: str, client: Client, conn) -> None:
    with running_worker(dsn, prefetch=3) as worker:
        wait_until(lambda: states(conn, [worker]) == ["idle"], what="worker idle")
        # Queue three jobs while paused, so one claim prefetches all of them.
        control(
            conn, f"INSERT INTO {S}.queues (name, paused, paused_at) VALUES (%s, true, now())", Q
        )
        first = client.enqueue("sleepy", queue=Q, args={"sleep": 0.8}, priority=1).id
        rest = [client.enqueue("echo", queue=Q).id for _ in range(2)]
        control(conn, f"UPDATE {S}.queues SET paused = false, paused_at = NULL WHERE name = %s", Q)
        wait_until(lambda: status(client, first) == "running", what="first job running")
        assert [status(client, j) for j in rest] == ["running", "running"]  # prefetched
        control(
            conn,
            f"INSERT INTO {S}.worker_parks (worker_id) VALUES (%s)",
            worker.worker_id,
            payload="*",
        )
        wait_until(lambda: status(client, first) == "succeeded", what="running job finished")
        wait_until(lambda: states(conn, [worker]) == ["parked"], what="worker parked")
        # The prefetched jobs went back, their attempt refunded, for another worker.
        back = conn.execute(
            f"SELECT status, attempt, claimed_by FROM {S}.jobs WHERE id = ANY(%s)", (rest,)
        ).fetchall()
        assert back == [("queued", 0, worker.worker_id)] * 2


def test_stop_request_finishes_the_current_job_then_exits(dsn: str, client: Client, conn) -> None:
    with running_worker(dsn) as worker:
        running = client.enqueue("sleepy", queue=Q, args={"sleep": 0.5}).id
        wait_until(lambda: status(client, running) == "running", what="job running")
        control(
            conn,
            f"UPDATE {S}.workers SET stop_requested_at = now() WHERE id = %s",
            worker.worker_id,
            payload="*",
        )
        later = client.enqueue("echo", queue=Q).id
        wait_until(lambda: worker.stopping, what="worker stopping")
        row = wait_until(
            lambda: conn.execute(
                f"SELECT state, stopped_at FROM {S}.workers WHERE id = %s AND stopped_at IS NOT NULL",
                (worker.worker_id,),
            ).fetchone(),
            what="worker row marked stopped",
        )
        assert row[0] == "stopped"
        assert status(client, running) == "succeeded"  # finished, not given back
        assert status(client, later) == "queued"  # never claimed


def test_scale_parks_surplus_workers_and_unparks_them(dsn: str, client: Client, conn) -> None:
    control(conn, f"INSERT INTO {S}.queues (name, scale_limit) VALUES (%s, 1)", Q)
    with ExitStack() as stack:
        workers = [stack.enter_context(running_worker(dsn)) for _ in range(3)]
        wait_until(
            lambda: states(conn, workers) == ["idle", "parked", "parked"],
            what="one worker claiming, two parked",
        )
        control(conn, f"UPDATE {S}.queues SET scale_limit = 2 WHERE name = %s", Q)
        wait_until(lambda: states(conn, workers) == ["idle", "idle", "parked"], what="scale 2")
        control(conn, f"UPDATE {S}.queues SET scale_limit = NULL WHERE name = %s", Q)
        wait_until(lambda: states(conn, workers) == ["idle"] * 3, what="no limit")
        slots = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
        ).fetchone()
        assert slots == (0,)  # no limit: every slot given back


def test_worker_turns_warm_and_prefers_warm_jobs(dsn: str, client: Client, conn) -> None:
    create_log_table(dsn)
    with running_worker(dsn, warm_key="model-a") as worker:
        wait_until(
            lambda: (
                conn.execute(
                    f"SELECT warm_key FROM {S}.workers WHERE id = %s", (worker.worker_id,)
                ).fetchone()
                == ("model-a",)
            ),
            what="warm key reported",
        )
        first = client.enqueue("record", queue=Q, affinity_key="model-b", args={"what": "b"}).id
        wait_until(lambda: status(client, first) == "succeeded", what="model-b job")
        wait_until(
            lambda: (
                conn.execute(
                    f"SELECT warm_key FROM {S}.workers WHERE id = %s", (worker.worker_id,)
                ).fetchone()
                == ("model-b",)
            ),
            what="warm for what it ran last",
        )
        # Queue a cold job ahead of a model-b one while the queue is paused, then resume.
        control(
            conn, f"INSERT INTO {S}.queues (name, paused, paused_at) VALUES (%s, true, now())", Q
        )
        client.enqueue("record", queue=Q, args={"what": "cold"})
        client.enqueue("record", queue=Q, affinity_key="model-b", args={"what": "warm"})
        control(conn, f"UPDATE {S}.queues SET paused = false, paused_at = NULL WHERE name = %s", Q)
        wait_until(
            lambda: conn.execute("SELECT count(*) FROM worker_test_log").fetchone() == (3,),
            what="all three jobs ran",
        )
    order = [r[0] for r in conn.execute("SELECT what FROM worker_test_log ORDER BY started")]
    assert order == ["b", "warm", "cold"]


def test_a_parked_worker_takes_a_freed_slot_at_its_next_poll(
    dsn: str, client: Client, conn
) -> None:
    """A slot frees silently (its holder exits or dies): the parked worker polls for it.

    The heartbeat period (and so the regular re-read of the controls) is 30 s
    here; the takeover must come from the 0.1 s poll.
    """
    control(conn, f"INSERT INTO {S}.queues (name, scale_limit) VALUES (%s, 1)", Q)
    slow = {"heartbeat_s": 30, "lease_ttl_s": 120}

    def slot_holder(workers: list[Worker]) -> Worker | None:
        row = conn.execute(
            f"SELECT w.id FROM {S}.workers w JOIN pg_locks l ON l.pid = w.backend_pid"
            " WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND w.id = ANY(%s)",
            ([w.worker_id for w in workers],),
        ).fetchall()
        return next((w for w in workers if [(w.worker_id,)] == row), None)

    with ExitStack() as stack:
        workers = [stack.enter_context(running_worker(dsn, **slow)) for _ in range(2)]
        holder = wait_until(lambda: slot_holder(workers), what="one worker holds the slot")
        (survivor,) = [w for w in workers if w is not holder]
        holder.stop()  # its session, and slot, go with it; no notification is sent
        wait_until(lambda: slot_holder(workers) is survivor, timeout=5, what="slot taken over")
        job_id = client.enqueue("echo", queue=Q).id
        wait_until(lambda: status(client, job_id) == "succeeded", what="job run by the survivor")
        ran = conn.execute(f"SELECT claimed_by FROM {S}.jobs WHERE id = %s", (job_id,)).fetchone()
        assert ran == (survivor.worker_id,)
