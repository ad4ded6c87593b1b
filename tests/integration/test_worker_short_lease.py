"""A job whose own ``lease_ttl_s`` is shorter than the worker's heartbeat.

The validator accepts a per-job lease of 1 s while the heartbeat (the lease
renewer) beats every 10 s by default: renewed only at the heartbeat, such a
lease would lapse while the job runs, the reaper would give a healthy job back
to the queue, and it would run twice (or never finish). The worker renews the
jobs it holds often enough for the shortest lease among them.
"""

from __future__ import annotations

import time

from support.workers import running_worker, statuses, wait_until

from queue_engine import Client
from queue_engine.orchestrator.reaper import Reaper

Q = "wt"


def test_a_lease_shorter_than_the_heartbeat_is_renewed_in_time(
    dsn: str, client: Client, conn
) -> None:
    job_id = client.enqueue("sleepy", queue=Q, args={"sleep": 3}, lease_ttl_s=1).id
    reaper = Reaper(dsn, "queue_engine")
    reaped: list[int] = []
    try:
        with running_worker(dsn, heartbeat_s=10, lease_ttl_s=30):
            wait_until(lambda: statuses(dsn)[job_id] != "queued", what="job claimed")
            # Sweep as an eager leader would, for as long as the job runs.
            while statuses(dsn)[job_id] == "running":
                result = reaper.run_once()
                reaped += [j.id for j in result.requeued + result.lost + result.canceled]
                time.sleep(0.2)
            wait_until(lambda: statuses(dsn)[job_id] == "succeeded", what="job succeeded")
    finally:
        reaper.on_stop()
    assert reaped == [], "the reaper took a job whose worker was alive and renewing"
    kinds = [
        r[0]
        for r in conn.execute(
            "SELECT kind FROM queue_engine.job_events WHERE job_id = %s ORDER BY id", (job_id,)
        )
    ]
    assert kinds == ["claimed", "succeeded"]
    row = conn.execute("SELECT attempt FROM queue_engine.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (1,)
