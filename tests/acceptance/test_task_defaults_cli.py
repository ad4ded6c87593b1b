"""Contract: ``queue-ctl enqueue`` applies a task's published defaults; ``queue-ctl tasks`` shows them.

The worker's registry is published as a worker does it at start
(``task_publications.publish``; the process test runs a real worker). Then
``queue-ctl enqueue TASK`` without options gets the task's queue, priority,
attempts, timeout and lease, an option given on the command line wins, and
``queue-ctl tasks`` lists each task's defaults with the workers that
published them (``--json`` too), and says when a task was never published;
a schedule's job takes what the schedule does not set.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from support.ctl import ok, queue_ctl

from queue_engine.producer.retry import FixedBackoff
from queue_engine.producer.task_publications import publish
from queue_engine.producer.tasks import TaskDefinition
from queue_engine.worker import store

S = "queue_engine"


def _noop(args: dict[str, Any]) -> None:
    return None


def publish_as(dsn: str, worker_id: str, host: str, pid: int, **options: Any) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        store.register(
            conn, S, worker_id=worker_id, queue="email", host=host, pid=pid, state="idle"
        )
        definition = TaskDefinition(name="cli.email", handler=_noop, **options)
        publish(conn, S, [definition], worker_id=worker_id, host=host, pid=pid, app="mail_app")


@pytest.fixture
def published(dsn: str) -> None:
    publish_as(
        dsn,
        "mail-1:4242:abcdef",
        "mail-1",
        4242,
        queue="email",
        priority=7,
        max_attempts=3,
        timeout_s=30,
        lease_ttl_s=45,
        retry=FixedBackoff(5),
    )


def enqueued(dsn: str, *options: str) -> dict[str, Any]:
    job: dict[str, Any] = json.loads(
        ok(queue_ctl("--dsn", dsn, "enqueue", "cli.email", "--json", *options))
    )
    return {k: job[k] for k in ("queue", "priority", "max_attempts", "timeout_s", "lease_ttl_s")}


def test_enqueue_takes_the_tasks_published_defaults(dsn: str, published: None) -> None:
    assert enqueued(dsn) == {
        "queue": "email",
        "priority": 7,
        "max_attempts": 3,
        "timeout_s": 30,
        "lease_ttl_s": 45,
    }


def test_an_option_on_the_command_line_wins(dsn: str, published: None) -> None:
    assert enqueued(dsn, "--queue", "urgent", "--max-attempts", "9", "--lease-ttl", "5") == {
        "queue": "urgent",
        "priority": 7,
        "max_attempts": 9,
        "timeout_s": 30,
        "lease_ttl_s": 5,
    }
    assert enqueued(dsn, "--priority", "0", "--timeout", "600")["priority"] == 0


def test_tasks_lists_the_defaults_and_who_published_them(dsn: str, published: None) -> None:
    out = ok(queue_ctl("--dsn", dsn, "tasks"))
    header, line = out.splitlines()
    assert header.split() == [
        "TASK",
        "QUEUE",
        "PRI",
        "TRIES",
        "TIMEOUT",
        "LEASE",
        "PUBLISHED",
        "BY",
        "STATE",
        "RETRY",
    ]
    cells = line.split()
    assert cells[:6] == ["cli.email", "email", "7", "3", "30s", "45s"]
    assert cells[7:] == ["ago", "mail-1:4242", "live", "fixed", "5s"]

    [document] = json.loads(ok(queue_ctl("--dsn", dsn, "tasks", "--json")))
    assert document["task"] == "cli.email"
    assert (document["queue"], document["max_attempts"], document["lease_ttl_s"]) == (
        "email",
        3,
        45,
    )
    assert document["retry"] == {"kind": "fixed", "seconds": 5.0}
    assert document["conflicts"] == {}
    [publication] = document["publications"]
    assert (publication["worker_id"], publication["host"], publication["pid"]) == (
        "mail-1:4242:abcdef",
        "mail-1",
        4242,
    )
    assert (publication["app"], publication["liveness"]) == ("mail_app", "live")
    assert publication["published_at"] == document["published_at"]


def test_tasks_reports_live_workers_that_disagree(dsn: str, published: None) -> None:
    publish_as(dsn, "mail-2:77:fedcba", "mail-2", 77, queue="email", priority=7, max_attempts=5)
    lines = ok(queue_ctl("--dsn", dsn, "tasks", "cli.email")).splitlines()
    assert lines[1].split()[:4] == ["cli.email", "email", "7", "5"]  # the newest is in effect
    assert lines[2].split()[:3] == ["email", "7", "3"]  # the other publication, below it
    assert "mail-1:4242" in lines[2]
    assert lines[3:] == [
        "! cli.email: live workers disagree on max_attempts (5, 3); 5 is in effect "
        "(the newest publication)",
        "! cli.email: live workers disagree on timeout_s (none, 30); none is in effect "
        "(the newest publication)",
        "! cli.email: live workers disagree on lease_ttl_s (none, 45); none is in effect "
        "(the newest publication)",
    ]


def test_tasks_says_what_a_task_nobody_published_gets(dsn: str) -> None:
    assert ok(queue_ctl("--dsn", dsn, "tasks")).strip() == (
        "no task published yet: workers publish their tasks' defaults when they start"
    )
    out = ok(queue_ctl("--dsn", dsn, "tasks", "cli.nobody")).strip()
    assert out.startswith("task 'cli.nobody': no worker has published it")
    assert "queue 'default', priority 100, 5 attempts" in out
    assert json.loads(ok(queue_ctl("--dsn", dsn, "tasks", "cli.nobody", "--json"))) == []


def test_a_schedules_job_takes_the_tasks_attempts_timeout_and_lease(
    dsn: str, published: None
) -> None:
    # A schedule keeps its own queue and priority (`default` and 100 here: the
    # CLI stores them); what it does not set comes from the task's defaults.
    ok(queue_ctl("--dsn", dsn, "schedules", "add", "nightly", "0 3 * * *", "--task", "cli.email"))
    job_id = ok(queue_ctl("--dsn", dsn, "schedules", "run-now", "nightly")).strip()
    job = json.loads(ok(queue_ctl("--dsn", dsn, "status", job_id, "--json")))
    assert {
        k: job[k] for k in ("queue", "priority", "max_attempts", "timeout_s", "lease_ttl_s")
    } == {
        "queue": "default",
        "priority": 100,
        "max_attempts": 3,
        "timeout_s": 30,
        "lease_ttl_s": 45,
    }
