"""A real worker publishes its tasks' defaults when it starts; ``queue-ctl enqueue`` then applies them.

``queue-claim-worker --queue td.mail --app defaults_app`` starts; ``queue-ctl
enqueue defaults.mail`` (a process that never imported the app) gets the
declared queue, priority, attempts, timeout and lease, so the job lands in the
worker's queue and the worker runs it; ``queue-ctl tasks`` lists the task with
the worker's host and pid. After a clean stop the publication stays, its
worker ``stopped``, and the defaults still apply.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from support.ctl import ok, queue_ctl
from support.workers import kill_all, spawn_worker, stop_process, wait_until

APP = "defaults_app"
QUEUE = "td.mail"
DECLARED = {"queue": QUEUE, "priority": 7, "max_attempts": 3, "timeout_s": 30, "lease_ttl_s": 45}


def tasks(dsn: str) -> list[dict[str, Any]]:
    known: list[dict[str, Any]] = json.loads(
        ok(queue_ctl("--dsn", dsn, "tasks", "defaults.mail", "--json"))
    )
    return known


def finished(dsn: str, job_id: int) -> dict[str, Any] | None:
    """The job as ``queue-ctl status --json`` prints it, once it succeeded."""
    job: dict[str, Any] = json.loads(ok(queue_ctl("--dsn", dsn, "status", str(job_id), "--json")))
    return job if job["status"] == "succeeded" else None


def test_a_started_worker_publishes_and_queue_ctl_enqueue_applies_the_defaults(
    dsn: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    worker = spawn_worker(dsn, log_file=log, queue=QUEUE, app=APP)
    try:
        # It logs worker.started once registered and published.
        wait_until(lambda: "worker.started" in log.read_text(), what="worker.started")
        job = json.loads(
            ok(
                queue_ctl(
                    "--dsn", dsn, "enqueue", "defaults.mail", "--args", '{"to": "ada"}', "--json"
                )
            )
        )
        assert {k: job[k] for k in DECLARED} == DECLARED
        done = wait_until(lambda: finished(dsn, job["id"]), what="the worker of td.mail to run it")
        assert done["result"] == {"sent_to": "ada"}

        [known] = tasks(dsn)
        assert {k: known[k] for k in DECLARED} == DECLARED
        assert known["retry"] == {"kind": "fixed", "seconds": 2.0}
        assert (known["host"], known["pid"], known["app"]) == (
            socket.gethostname(),
            worker.pid,
            APP,
        )
        assert [p["liveness"] for p in known["publications"]] == ["live"]
        assert f"{socket.gethostname()}:{worker.pid}" in ok(queue_ctl("--dsn", dsn, "tasks"))
        assert stop_process(worker) == 0
    finally:
        kill_all([worker])
    # A stopped worker's publication stays, as history; its defaults still apply.
    [known] = tasks(dsn)
    assert [p["liveness"] for p in known["publications"]] == ["stopped"]
    again = json.loads(ok(queue_ctl("--dsn", dsn, "enqueue", "defaults.mail", "--json")))
    assert {k: again[k] for k in DECLARED} == DECLARED
