"""Time every dashboard page against a jobs table of 1,000,000 jobs (issue 12: each < 300 ms).

Fills a fresh database with ``--jobs`` jobs in one ``INSERT ... SELECT
generate_series`` (four queues; mostly succeeded over the last three days, 1 %
failed, some canceled, 30,000 finished in the last hour, a backlog queued and
a few running; two events per job of the last day), a fleet of worker rows
and a few schedules, runs ``ANALYZE``, starts a real ``queue-web`` on it and
requests each page ``--repeat`` times over HTTP (basic auth, as a browser
would after signing in). Prints p50 and p95 per page as Markdown and exits 1
when a page's p95 is over the budget.

Usage::

    python bench/web_pages.py                    # embedded Postgres, 1,000,000 jobs
    python bench/web_pages.py --jobs 100000 --repeat 5
    python bench/web_pages.py --dsn postgresql://postgres@localhost/postgres

With ``--dsn`` the DSN is an admin connection: the script creates and drops
its own database.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
import urllib.request
from typing import Any

import psycopg
from lib.postgres import fresh_database, server
from lib.report import table
from lib.timing import pct
from lib.web import queue_web

from queue_engine.operator import stats

S = "queue_engine"
BUDGET_MS = 300.0
USER = ("bench", "bench-password")

FILL = """
INSERT INTO queue_engine.jobs
    (queue, task, args, status, priority, available_at, attempt, max_attempts, error,
     created_at, started_at, finished_at, duration_ms, result, claimed_by, lease_expires_at)
SELECT q.queue,
       'task_' || (g %% 7),
       jsonb_build_object('customer', g %% 50000, 'region', (ARRAY['eu', 'us', 'ap'])[1 + g %% 3]),
       st.status,
       100,
       t.created,
       CASE WHEN st.status = 'queued' THEN 0 ELSE 1 END,
       5,
       CASE WHEN st.status = 'failed' THEN 'Traceback (most recent call last):\n  ValueError: bad' END,
       t.created,
       CASE WHEN st.status <> 'queued' THEN t.created + interval '50 ms' END,
       CASE WHEN st.status IN ('succeeded', 'failed', 'canceled')
            THEN t.created + interval '250 ms' END,
       CASE WHEN st.status IN ('succeeded', 'failed') THEN 200 END,
       CASE WHEN st.status = 'succeeded' THEN '{"ok": true}'::jsonb END,
       CASE WHEN st.status = 'running' THEN 'bench-worker-' || (g %% 20) END,
       CASE WHEN st.status = 'running' THEN now() + interval '5 minutes' END
FROM generate_series(1, %(n)s) g
CROSS JOIN LATERAL (SELECT (ARRAY['default', 'emails', 'reports', 'media'])[1 + g %% 4] AS queue) q
CROSS JOIN LATERAL (
    -- Oldest first: ids grow with time, as in a real table.
    SELECT now() - (interval '3 days') * (1 - g::float8 / %(n)s) AS created
) t
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN g > %(n)s - %(queued)s THEN 'queued'
        WHEN g > %(n)s - %(queued)s - 40 THEN 'running'
        WHEN g %% 100 = 0 THEN 'failed'
        WHEN g %% 500 = 1 THEN 'canceled'
        ELSE 'succeeded'
    END AS status
) st
"""

EVENTS = """
INSERT INTO queue_engine.job_events (job_id, at, kind, from_status, to_status, attempt, worker_id)
SELECT j.id, j.started_at, 'claimed', 'queued', 'running', 1, 'bench-worker-1'
FROM queue_engine.jobs j WHERE j.started_at > now() - interval '1 day'
UNION ALL
SELECT j.id, j.finished_at, j.status, 'running', j.status, 1, 'bench-worker-1'
FROM queue_engine.jobs j WHERE j.finished_at > now() - interval '1 day'
"""

WORKERS = """
INSERT INTO queue_engine.workers (id, role, host, pid, queue, state, started_at, heartbeat_at,
                                  telemetry)
SELECT 'bench-worker-' || g, 'worker', 'host-' || (g % 4), 1000 + g,
       (ARRAY['default', 'emails', 'reports', 'media'])[1 + g % 4], 'idle', now(), now(),
       '{"load": [0.5, 0.4, 0.3], "gpu": null}'::jsonb
FROM generate_series(0, 19) g
"""


def fill(dsn: str, n: int) -> dict[str, Any]:
    """Insert the jobs, events, workers and schedules; return ids to visit."""
    queued = min(20_000, n // 50)
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FILL, {"n": n, "queued": queued})
        conn.execute(EVENTS)
        conn.execute(WORKERS)
        for i, expression in enumerate(("*/5 * * * *", "0 * * * *", "30 2 * * *")):
            conn.execute(
                f"INSERT INTO {S}.schedules (name, expression, tz, task, queue, source,"
                " checked_until) VALUES (%s, %s, 'UTC', 'task_1', 'default', 'cli', now())",
                (f"bench-{i}", expression),
            )
        conn.execute(f"ANALYZE {S}.jobs")
        conn.execute(f"ANALYZE {S}.job_events")
        ids = dict(
            conn.execute(
                f"SELECT status, max(id) FROM {S}.jobs WHERE status IN ('failed', 'running')"
                " GROUP BY status"
            ).fetchall()
        )
        total = conn.execute(f"SELECT count(*) FROM {S}.jobs").fetchone()
    print(
        f"filled {total[0] if total else 0:,} jobs in {time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    return {"failed": ids.get("failed", 1), "running": ids.get("running", 1), "n": n}


def get(url: str, auth: str) -> tuple[int, float]:
    """One request; (status, milliseconds)."""
    request = urllib.request.Request(url, headers={"Authorization": auth})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        response.read()
        status = int(response.status)
    return status, (time.perf_counter() - started) * 1000


def pages(ids: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, path) of every page and fragment a visitor can open."""
    middle = ids["n"] // 2
    return [
        ("overview", "/"),
        ("overview fragment (live)", "/fragments/overview"),
        ("jobs, newest", "/jobs"),
        ("jobs, status failed", "/jobs?status=failed"),
        ("jobs, queue emails, running", "/jobs?queue=emails&status=running"),
        ("jobs, task filter", "/jobs?task=task_3"),
        ("jobs, args contain", '/jobs?args={"customer":4242}'),
        ("jobs, a filter matching nothing", "/jobs?task=no_such_task"),
        ("jobs, created range", "/jobs?since=2000-01-01T00:00&until=2100-01-01T00:00"),
        ("jobs, page in the middle", f"/jobs?before={middle}"),
        ("jobs, bulk preview (cancel)", "/jobs?queue=reports&status=queued&preview=cancel"),
        ("jobs, bulk preview (retry failed)", "/jobs?status=failed&preview=retry"),
        ("job detail (failed)", f"/jobs/{ids['failed']}"),
        ("job detail fragment (running)", f"/fragments/jobs/{ids['running']}"),
        ("queues", "/queues"),
        ("workers", "/workers"),
        ("schedules", "/schedules"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="", help="an admin DSN (default: an embedded Postgres)")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    auth = "Basic " + base64.b64encode(f"{USER[0]}:{USER[1]}".encode()).decode()
    env = {"QUEUE_ENGINE_WEB_USERS": f"{USER[0]}:operator:{USER[1]}"}
    with server(args.dsn) as admin_dsn, fresh_database(admin_dsn) as dsn:
        ids = fill(dsn, args.jobs)
        with queue_web(dsn, env) as base:
            get(f"{base}/", auth)  # the aggregator's first read, the pool's connections
            time.sleep(2)
            rows = []
            slow = []
            for label, path in pages(ids):
                times = []
                for _ in range(args.repeat):
                    status, ms = get(base + path, auth)
                    if status != 200:
                        raise SystemExit(f"{path}: HTTP {status}")
                    times.append(ms)
                times.sort()
                p50 = statistics.median(times)
                p95 = pct(times, 95)
                rows.append((label, f"`{path}`", f"{p50:.1f}", f"{p95:.1f}"))
                if p95 > BUDGET_MS:
                    slow.append(label)
        with psycopg.connect(dsn, autocommit=True) as conn:
            timed = []
            for _ in range(5):
                started = time.perf_counter()
                conn.execute(f"SELECT * FROM {S}.jobs LIMIT 0")  # warm the catalog
                stats.queue_stats(conn, S)
                stats.workers(conn, S)
                timed.append((time.perf_counter() - started) * 1000)
    print(f"\n{args.jobs:,} jobs, {args.repeat} requests per page, budget {BUDGET_MS:.0f} ms\n")
    table(["page", "path", "p50 ms", "p95 ms"], rows)
    print(
        f"\naggregator read (stats_queues + stats_workers, once per refresh, shared by every "
        f"browser): median {statistics.median(timed):.1f} ms"
    )
    if slow:
        raise SystemExit(f"over {BUDGET_MS:.0f} ms at p95: {', '.join(slow)}")


if __name__ == "__main__":
    main()
