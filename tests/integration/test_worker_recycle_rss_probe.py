"""Recycling in a worker run in-process: the injected RSS probe and spread decide, ``run()`` says 79.

The process tests (``tests/process/test_worker_recycle.py``) run the real
console script; here the RSS is scripted, so the job after which the worker
recycles is known exactly.
"""

from __future__ import annotations

import threading

import pytest
import qe_worker_tasks
from support.workers import statuses, wait_until

from queue_engine import Client
from queue_engine.daemon.service import Timing
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.worker import Worker, WorkerSettings

Q = "wt"


def test_the_worker_recycles_after_the_job_that_crossed_the_rss_limit(
    dsn: str, client: Client
) -> None:
    ids = client.enqueue_many([{"task": "echo", "queue": Q, "args": {"i": i}} for i in range(6)])
    readings = iter([150.0, 180.0, 240.0, 999.0])  # MiB after jobs 1, 2, 3, ...
    probes: list[float] = []

    def rss_mb() -> float:
        probes.append(next(readings))
        return probes[-1]

    settings = WorkerSettings(
        queue=Q,
        app="qe_worker_tasks",
        dsn=dsn,
        poll_s=0.1,
        heartbeat_s=0.5,
        lease_ttl_s=30,
        prefetch=3,
        max_rss_mb=250,
    )
    # rand 0.8: the limit is 250 x (1 - 0.1 x 0.8) = 230 MiB, reached by the third job.
    worker = Worker(
        settings, qe_worker_tasks.private_registry(), rss_mb=rss_mb, timing=Timing(rand=lambda: 0.8)
    )
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: codes, timeout=60, what="the worker recycled")
    finally:
        worker.stop()
        thread.join(30)
    assert codes == [ExitCode.RECYCLE]
    assert worker.recycler.limits.max_rss_mb == pytest.approx(230.0)
    assert probes == [150.0, 180.0, 240.0]  # one reading per job, none while idle
    reached = worker.recycler.reached
    assert reached is not None and (reached.reason, reached.value) == ("max_rss_mb", 240.0)
    current = statuses(dsn)
    assert sorted(current[i] for i in ids) == ["queued"] * 3 + ["succeeded"] * 3
