"""A fleet with realistic data for the dashboard's screenshots: what an operator's day looks like.

:func:`build_scene` fills a test database through the real paths (the
``Client``, the schedule store, real ``queue-claim-worker`` processes running
the test apps' handlers), so each page has something true to show:

- several schedules (time zones, one disabled, long names) with the slots of
  the last three hours enqueued by the real ticker, and one run now;
- backlogs on queues no worker serves, and delayed jobs (minutes, an hour, a day);
- jobs that succeeded, a retry that succeeded on its second attempt, and
  failed imports whose errors are long, with a URL longer than any pane and a
  chained traceback;
- a workflow with a fan-out, a fan-in, a node that failed, an input node
  awaiting its value and its child, and a wide one (a 300-way fan-out);
- running jobs holding their workers with ``{step, of}`` progress;
- and, before ``queue-web`` starts (the :func:`past_hour` fixture), an hour
  of finished jobs, so the overview's charts have a past to draw.

It needs three workers on the ``wt`` queue: two end up holding the running
jobs, the third keeps the rest moving.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from queue_engine import Client
from queue_engine.producer.schedules import ScheduleSpec
from queue_engine.producer.workflows import Workflow, finished
from queue_engine.scheduler import store as schedule_store
from queue_engine.testing.scheduling import tick
from support.workers import wait_until

S = "queue_engine"
Q = "wt"
#: Workers :func:`build_scene` needs on queue ``wt``.
WORKERS = 3

SCHEDULES = (
    ScheduleSpec(
        "nightly-ledger-import", "0 2 * * *", "ledger.import", tz="Europe/Berlin", queue="etl"
    ),
    ScheduleSpec("hourly-report-digest", "15 * * * *", "report.digest", queue="reports"),
    ScheduleSpec(
        "invoice-reminders-business-days",
        "0 9 * * 1-5",
        "email.invoice_reminder",
        tz="America/New_York",
        queue="emails",
    ),
    ScheduleSpec("cleanup-temp-exports", "every 30m", "exports.cleanup", queue="maintenance"),
    ScheduleSpec("warm-model-cache", "*/10 * * * *", "model.warm", queue="gpu", enabled=False),
    ScheduleSpec(
        "quarterly-audit-snapshot", "0 3 1 */3 *", "audit.snapshot", tz="Asia/Tokyo", queue="etl"
    ),
)


#: An hour of throughput per queue: (queue, task, jobs per minute, swing up and down).
PAST_HOUR = (
    ("emails", "email.send", 30, 12),
    ("reports", "report.render", 6, 3),
    ("thumbnails", "thumbnail.resize", 18, 9),
    ("wt", "echo", 8, 4),
)

#: The jobs finished in each of the last 60 minutes, as a worker's finish leaves them.
PAST_HOUR_SQL = f"""
INSERT INTO {S}.jobs (queue, task, status, attempt, created_at, available_at, started_at,
                      finished_at, duration_ms)
SELECT q.queue, q.task, 'succeeded', 1,
       f.at - make_interval(secs => f.ms / 1000.0 + 2 + i %% 5),
       f.at - make_interval(secs => f.ms / 1000.0 + 2 + i %% 5),
       f.at - make_interval(secs => f.ms / 1000.0), f.at, f.ms
FROM (VALUES {", ".join("(%s, %s, %s::int, %s::int)" for _ in PAST_HOUR)}) q(queue, task, rate, swing)
CROSS JOIN generate_series(1, 60) AS m(ago)
CROSS JOIN LATERAL generate_series(
    1, greatest(1, round(q.rate + q.swing * sin(m.ago / 7.0 + length(q.queue))
                         + q.swing * ((m.ago * 37 + length(q.queue) * 11) %% 9 - 4) / 8.0)::int)
) AS i
CROSS JOIN LATERAL (
    SELECT date_trunc('minute', now()) - make_interval(mins => m.ago) + make_interval(secs => i) AS at,
           200 + (i * 137 + m.ago * 61) %% 1400 AS ms
) f
"""


@pytest.fixture(name="past_hour")
def past_hour_fixture(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """An hour of finished jobs; ask for it before ``web_server``, whose charts read it at start."""
    conn.execute(PAST_HOUR_SQL, [value for row in PAST_HOUR for value in row])  # type: ignore[arg-type]
    yield


@dataclass(frozen=True)
class Scene:
    """The ids the tour opens: one of each kind of job and workflow."""

    failed: int
    running: int
    scheduled: int
    input_job: int
    workflow: int
    wide: int
    schedules: tuple[str, ...]


def nightly_etl() -> Workflow:
    """A fan-out, a fan-in, a check that fails, an input node ``approve`` and its child.

    Run by workers on ``wt``: every node but ``approve`` and ``publish`` ends,
    ``check`` failed, ``report`` ran anyway (after ``finished("check")``).
    """
    wf = Workflow("nightly-etl", idempotency_key="nightly:2026-11-23")
    wf.add("fetch", "echo", queue=Q, args={"day": "2026-11-23"})
    for i in range(8):
        wf.add(f"parse-{i}", "echo", queue=Q, args={"part": i}, after=["fetch"])
    wf.add("check", "permanent", queue=Q, args={"reason": "bad row 17"}, after=["fetch"])
    wf.add("aggregate", "echo", queue=Q, after=[f"parse-{i}" for i in range(8)])
    wf.add("report", "echo", queue=Q, after=[finished("check"), "aggregate"])
    wf.input("approve", after=["aggregate"], queue=Q)
    wf.add("publish", "echo", queue=Q, after=["approve"])
    return wf


def awaiting_approval(client: Client, workflow_id: int) -> bool:
    """True once :func:`nightly_etl` ran as far as it can: ``approve`` awaits its value."""
    nodes = {n.node: n for n in client.workflow_nodes(workflow_id)}
    return nodes["approve"].pending_parents == 0 and nodes["report"].status == "succeeded"


def _status(conn: psycopg.Connection[Any], job_id: int) -> str:
    row = conn.execute(f"SELECT status FROM {S}.jobs_all WHERE id = %s", (job_id,)).fetchone()
    return "" if row is None else str(row[0])


def _all_ended(conn: psycopg.Connection[Any], ids: list[int]) -> bool:
    ended = {"succeeded", "failed", "canceled", "lost"}
    return all(_status(conn, i) in ended for i in ids)


def build_scene(client: Client, conn: psycopg.Connection[Any]) -> Scene:
    """Fill the database (workers must be running on ``wt``); returns what the tour opens."""
    for spec in SCHEDULES:
        schedule_store.add(conn, S, spec)
    # As if a scheduler had been running for the last three hours: the real ticker
    # enqueues the slots since then, so the schedules have a last slot and job.
    conn.execute(f"UPDATE {S}.schedules SET checked_until = now() - interval '3 hours'")
    tick(conn, datetime.now(UTC), grace_s=4 * 3600)
    schedule_store.run_now(conn, S, "hourly-report-digest", producer="queue-web")

    # A wide workflow whose fan-out waits on a queue nobody serves right now.
    wide = Workflow("thumbnail-backfill")
    wide.add("list-images", "echo", queue=Q, args={"bucket": "media-eu"})
    for i in range(300):
        wide.add(
            f"resize-{i}",
            "thumbnail.resize",
            queue="thumbnails",
            args={"batch": i},
            after=["list-images"],
        )
    wide.add("publish-index", "echo", queue=Q, after=[f"resize-{i}" for i in range(300)])
    wide_info = client.start_workflow(wide)

    # Backlogs: queues with jobs and no worker.
    for i in range(40):
        client.enqueue(
            "email.send",
            queue="emails",
            args={"to": f"customer{1000 + i}@example.com", "template": "invoice-ready"},
        )
    for i in range(12):
        client.enqueue(
            "report.render",
            queue="reports",
            args={"report": "monthly-revenue", "region": f"eu-{i}"},
        )

    info = client.start_workflow(nightly_etl())

    # Jobs the workers run to their end.
    done = [
        client.enqueue("echo", queue=Q, args={"customer": 1000 + i, "region": "eu-west"}).id
        for i in range(6)
    ]
    done.append(client.enqueue("steps", queue=Q, args={"n": 4}).id)
    done.append(client.enqueue("flaky", queue=Q, args={"fail_times": 1}).id)
    failed = client.enqueue(
        "feeds.import", queue=Q, args={"feed": "ledger", "day": "2026-11-23"}, max_attempts=3
    ).id
    fx = client.enqueue(
        "feeds.import", queue=Q, args={"feed": "fx-rates", "row": 77}, max_attempts=1
    )
    done += [failed, fx.id]
    done.append(client.enqueue("permanent", queue=Q, args={"reason": "bad input"}).id)
    wait_until(lambda: _all_ended(conn, done), timeout=90, what="the scene's jobs ended")

    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    wait_until(
        lambda: awaiting_approval(client, info.id),
        timeout=90,
        what="the input node awaiting its value",
    )
    wait_until(
        lambda: _status(conn, client.workflow_nodes(wide_info.id)[0].job_id) == "succeeded",
        what="the wide workflow's first node",
    )

    # Delayed jobs: in a few minutes, in an hour, tomorrow.
    scheduled = client.enqueue(
        "report.render", queue="reports", args={"report": "weekly"}, delay=240
    ).id
    client.enqueue("email.send", queue="emails", args={"to": "ops@example.com"}, delay=3600)
    client.enqueue(
        "ledger.close",
        queue="etl",
        args={"day": "2026-11-23"},
        run_at=datetime.now(UTC) + timedelta(days=1),
    )

    # Running jobs with progress, holding two of the three workers.
    running = client.enqueue(
        "ledger.load_rows",
        queue=Q,
        args={"file": "ledger-2026-11-23.csv", "rows": 52000, "done": 18400},
    ).id
    other = client.enqueue(
        "ledger.load_rows", queue=Q, args={"file": "fx-rates.csv", "rows": 40, "done": 17}
    ).id

    def progressing() -> bool:
        rows = conn.execute(
            f"SELECT count(*) FROM {S}.jobs WHERE id = ANY(%s) AND status = 'running' AND progress IS NOT NULL",
            ([running, other],),
        ).fetchone()
        return rows == (2,)

    wait_until(progressing, timeout=60, what="two running jobs with progress")
    return Scene(
        failed=failed,
        running=running,
        scheduled=scheduled,
        input_job=nodes["approve"].job_id,
        workflow=info.id,
        wide=wide_info.id,
        schedules=tuple(s.name for s in SCHEDULES),
    )
