"""Contract: ``queue-ctl stats/workers/show/top/roles`` as an operator runs them (subprocess).

Tables on stdout, ``--json`` documents with the figures and the replicas
formula, ``show`` with the event timeline, ``top`` printing one snapshot (and
no terminal escape codes) when stdout is not a terminal, ``--iterations N``
printing N frames, ``roles`` printing the template for the configured schema,
and the usual one-line errors.
"""

from __future__ import annotations

import json
from typing import Any

from support.ctl import ok, queue_ctl


def seed(conn: Any) -> int:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task) SELECT 'cli.q', 'cli.task' "
        "FROM generate_series(1, 3)"
    )
    conn.execute(
        "INSERT INTO queue_engine.workers (id, queue, host, pid, state, rss_bytes, cpu_percent) "
        "VALUES ('w-cli-1', 'cli.q', 'host-a', 777, 'idle', 52428800, 3.5)"
    )
    row = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, started_at, finished_at, "
        "duration_ms) VALUES ('cli.q', 'cli.done', 'succeeded', 1, now(), now(), 12) RETURNING id"
    ).fetchone()
    assert row is not None
    conn.execute(
        "INSERT INTO queue_engine.job_events (job_id, kind, from_status, to_status, attempt, "
        "worker_id, message) VALUES (%(id)s, 'claimed', 'queued', 'running', 1, 'w-cli-1', NULL), "
        "(%(id)s, 'succeeded', 'running', 'succeeded', 1, 'w-cli-1', 'all good')",
        {"id": row[0]},
    )
    return int(row[0])


def test_stats_table_and_json(dsn: str, conn: Any) -> None:
    seed(conn)
    out = ok(queue_ctl("--dsn", dsn, "stats"))
    header, line = out.splitlines()[:2]
    assert header.split()[:4] == ["QUEUE", "QUEUED", "DELAYED", "RUNNING"]
    assert line.split()[:5] == ["cli.q", "3", "0", "0", "1"]
    doc = json.loads(ok(queue_ctl("--dsn", dsn, "stats", "--json", "--queue", "cli.q")))
    (q,) = doc["queues"]
    assert (q["queue"], q["queued"], q["succeeded_1h"], q["workers_live"]) == ("cli.q", 3, 1, 1)
    assert q["replicas"]["suggested"] == 1
    assert "target_utilisation" in q["replicas"] and "formula" in q["replicas"]
    assert "replicas" in doc["definitions"]
    empty = json.loads(ok(queue_ctl("--dsn", dsn, "stats", "--json", "--queue", "nothing.here")))
    assert empty["queues"] == []


def test_stats_marks_figures_above_the_cap(dsn: str, conn: Any) -> None:
    """With QUEUE_ENGINE_STATS_EXACT_CAP=2, three queued jobs are more than counted exactly."""
    seed(conn)
    env = {"QUEUE_ENGINE_STATS_EXACT_CAP": "2"}
    out = ok(queue_ctl("--dsn", dsn, "stats", env=env)).splitlines()
    queued_cell = out[1].split()[1]
    assert queued_cell.startswith(("~", "\N{GREATER-THAN OR EQUAL TO}")), out[1]
    assert "QUEUE_ENGINE_STATS_EXACT_CAP" in out[-1]
    doc = json.loads(ok(queue_ctl("--dsn", dsn, "stats", "--json", env=env)))
    (q,) = doc["queues"]
    assert "queued" in q["estimated"] + q["at_least"]
    assert doc["exact_cap"] == 2
    exact = json.loads(ok(queue_ctl("--dsn", dsn, "stats", "--json")))
    assert exact["queues"][0]["estimated"] == [] and exact["queues"][0]["at_least"] == []


def test_workers_and_show(dsn: str, conn: Any) -> None:
    job_id = seed(conn)
    out = ok(queue_ctl("--dsn", dsn, "workers"))
    assert "w-cli-1" in out and "host-a" in out and "50.0M" in out and "live" in out
    (w,) = json.loads(ok(queue_ctl("--dsn", dsn, "workers", "--json")))
    assert (w["id"], w["pid"], w["rss_bytes"], w["liveness"]) == ("w-cli-1", 777, 52428800, "live")

    out = ok(queue_ctl("--dsn", dsn, "show", str(job_id)))
    assert "cli.done" in out and "all good" in out
    assert out.index("claimed") < out.index("all good")
    doc = json.loads(ok(queue_ctl("--dsn", dsn, "show", str(job_id), "--json")))
    assert [e["kind"] for e in doc["events"]] == ["claimed", "succeeded"]
    assert doc["deaths"] == {"count": 0, "session_ended": 0, "lease_expired": 0}
    assert "died:" not in out  # only a job whose worker died gets the line
    missing = queue_ctl("--dsn", dsn, "show", "999999")
    assert missing.returncode == 1
    assert missing.stderr.strip() == "queue-ctl: error: job 999999 not found"


def test_top_prints_one_snapshot_when_not_a_terminal(dsn: str, conn: Any) -> None:
    seed(conn)
    out = ok(queue_ctl("--dsn", dsn, "top"))
    assert "\x1b" not in out
    assert out.startswith("queue-engine top")
    assert out.count("queue-engine top") == 1
    assert "cli.q" in out and "w-cli-1" in out
    out = ok(queue_ctl("--dsn", dsn, "top", "--iterations", "2", "--interval", "0.1"))
    assert out.count("queue-engine top") == 2


def test_top_fits_an_80_column_terminal(dsn: str, conn: Any) -> None:
    """``COLUMNS=80``: every line fits, the key columns and the rows stay (the right half was cut)."""
    seed(conn)
    lines = ok(queue_ctl("--dsn", dsn, "top", env={"COLUMNS": "80"})).splitlines()
    assert max(len(line) for line in lines) <= 80
    workers_header = next(line for line in lines if line.startswith("ID "))
    assert {"QUEUE", "STATE", "LIVENESS"} <= set(workers_header.split())
    assert any(line.startswith("w-cli-1 ") and line.endswith("live") for line in lines)
    assert any(line.startswith("cli.q ") for line in lines)
    assert "columns hidden at this width" in lines[1]


def test_roles_prints_the_template_for_the_schema(dsn: str) -> None:
    out = ok(queue_ctl("--dsn", dsn, "--schema", "jobs_x", "roles", "--worker-role", "etl_worker"))
    assert "CREATE ROLE etl_worker NOLOGIN" in out
    assert 'GRANT SELECT, UPDATE ON "jobs_x".jobs TO etl_worker;' in out
    assert "__" not in out
    bad = queue_ctl("--dsn", dsn, "roles", "--worker-role", "Bad Name")
    assert bad.returncode == 2 and "invalid role name" in bad.stderr
