"""Contract of the metrics endpoint (``queue_engine.metrics.start_metrics_server``).

``/metrics`` is Prometheus text with the queue figures read on each scrape
(depth by state, oldest queued age, finished per status, throughput, workers by
liveness, a run-time histogram) and the process counters ``metrics.count``
increments; ``/health`` answers 200 with the leader flag while the database
answers and 503 once it does not (its database dropped), and the scrape then
reports ``queue_engine_database_up 0`` instead of failing.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from queue_engine import metrics

SCHEMA = "queue_engine"


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


@pytest.fixture
def workload(conn: Any) -> None:
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, created_at, available_at) VALUES "
        "('m', 't', now() - interval '40 s', now() - interval '40 s'), "
        "('m', 't', now(), now()), ('m', 't', now(), now() + interval '1 hour')"
    )
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, status, attempt, created_at, started_at, "
        "finished_at, duration_ms) VALUES "
        "('m', 't', 'succeeded', 1, now() - interval '2 min', now() - interval '2 min', "
        " now() - interval '1 min', 200), "
        "('m', 't', 'succeeded', 1, now() - interval '2 min', now() - interval '2 min', "
        " now() - interval '1 min', 3000), "
        "('m', 't', 'failed', 1, now() - interval '2 min', now() - interval '2 min', "
        " now() - interval '1 min', 20000)"
    )
    conn.execute(
        "INSERT INTO queue_engine.workers (id, queue, host, pid, state, heartbeat_at) VALUES "
        "('w1', 'm', 'h', 1, 'idle', now()), ('w2', 'm', 'h', 2, 'busy', now()), "
        "('w3', 'm', 'h', 3, 'busy', now() - interval '5 minutes')"
    )


@pytest.fixture
def server(dsn: str) -> Iterator[metrics.MetricsServer]:
    metrics.reset_counters()
    handle = metrics.start_metrics_server(dsn, SCHEMA, 0, is_leader=lambda: True, dead_after=30)
    yield handle
    handle.stop()
    handle.stop()  # safe twice


def test_metrics_content_for_a_known_workload(server, workload) -> None:
    metrics.count("reaper_requeued", 3)
    metrics.count("dead_workers_flagged")
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    q = ("queue", "m")
    assert got[("queue_engine_database_up", ())] == 1
    assert got[("queue_engine_queue_jobs", (q, ("state", "queued")))] == 2
    assert got[("queue_engine_queue_jobs", (q, ("state", "delayed")))] == 1
    assert got[("queue_engine_queue_jobs", (q, ("state", "running")))] == 0
    assert 39 <= got[("queue_engine_queue_oldest_queued_seconds", (q,))] < 60
    assert got[("queue_engine_queue_finished_last_hour", (q, ("status", "succeeded")))] == 2
    assert got[("queue_engine_queue_finished_last_hour", (q, ("status", "failed")))] == 1
    assert got[
        ("queue_engine_queue_throughput_per_second", (("direction", "out"), q, ("window", "15m")))
    ] == pytest.approx(3 / 900)
    assert got[("queue_engine_queue_workers", (("liveness", "live"), q))] == 2
    assert got[("queue_engine_queue_workers", (("liveness", "dead"), q))] == 1
    assert got[("queue_engine_queue_paused", (q,))] == 0
    assert (
        got[
            (
                "queue_engine_workers",
                (("liveness", "live"), q, ("role", "worker"), ("state", "busy")),
            )
        ]
        == 1
    )
    # Run times 0.2 s, 3 s, 20 s: cumulative buckets.
    le = lambda b: ("queue_engine_job_duration_seconds_bucket", (("le", b), q))  # noqa: E731
    assert got[le("0.1")] == 0
    assert got[le("0.5")] == 1
    assert got[le("5.0")] == 2
    assert got[le("30.0")] == 3
    assert got[le("+Inf")] == 3
    assert got[("queue_engine_job_duration_seconds_gsum", (q,))] == pytest.approx(23.2)
    assert got[("queue_engine_reaper_requeued_total", ())] == 3
    assert got[("queue_engine_dead_workers_flagged_total", ())] == 1
    assert got[("queue_engine_pruned_jobs_total", ())] == 0
    assert "# TYPE queue_engine_reaper_requeued_total counter" in text


def test_health_is_200_then_503_when_the_database_is_gone(server, pg_server, dsn) -> None:
    code, body = get(f"http://127.0.0.1:{server.port}/health")
    assert code == 200
    assert json.loads(body) == {"status": "ok", "leader": True, "db": "ok"}
    assert get(f"http://127.0.0.1:{server.port}/nope")[0] == 404

    dbname = dsn.rsplit("dbname=", 1)[-1].split()[0]
    with pg_server.admin() as admin:
        admin.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')
    code, body = get(f"http://127.0.0.1:{server.port}/health")
    assert code == 503
    doc = json.loads(body)
    assert doc["status"] == "error" and doc["leader"] is True and doc["db"] != "ok"
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    assert samples(text)[("queue_engine_database_up", ())] == 0
    assert "queue_engine_reaper_requeued_total" in text
    with pg_server.admin() as admin:  # let the fixture's DROP find something
        admin.execute(f'CREATE DATABASE "{dbname}"')


def test_count_validates_and_a_busy_port_is_a_config_error(server, dsn) -> None:
    with pytest.raises(ValueError):
        metrics.count("Bad-Name")
    with pytest.raises(ValueError):
        metrics.count("reaper_requeued", -1)
    metrics.count("custom_thing", 2)
    assert metrics.counters()["custom_thing"] == 2
    with pytest.raises(metrics.ConfigError, match="cannot serve metrics"):
        metrics.start_metrics_server(dsn, SCHEMA, server.port)


def test_metrics_report_paused_queues(server, workload, conn: Any) -> None:
    from queue_engine.controls import pause_queue

    pause_queue(conn, SCHEMA, "m")
    pause_queue(conn, SCHEMA, "idle.q")
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    assert got[("queue_engine_queue_paused", (("queue", "m"),))] == 1
    assert got[("queue_engine_queue_paused", (("queue", "idle.q"),))] == 1
    assert got[("queue_engine_queue_jobs", (("queue", "idle.q"), ("state", "queued")))] == 0
