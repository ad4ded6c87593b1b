"""Contract of the metrics endpoint (``queue_engine.orchestrator.metrics.start_metrics_server``).

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
from support.flow import PARTITION_QUEUE, PARTITIONS, build_scene

from queue_engine.orchestrator import flow_metrics, metrics

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
    from queue_engine.operator.controls import pause_queue

    pause_queue(conn, SCHEMA, "m")
    pause_queue(conn, SCHEMA, "idle.q")
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    assert got[("queue_engine_queue_paused", (("queue", "m"),))] == 1
    assert got[("queue_engine_queue_paused", (("queue", "idle.q"),))] == 1
    assert got[("queue_engine_queue_jobs", (("queue", "idle.q"), ("state", "queued")))] == 0


MIB = 1024 * 1024
TWO_GPUS = (
    '[{"utilization_pct": 37, "memory_used_mib": 10240, "memory_total_mib": 81920},'
    ' {"utilization_pct": null, "memory_used_mib": 3, "memory_total_mib": 16384}]'
)


@pytest.fixture
def fleet(conn: Any) -> None:
    """Worker rows with telemetry: live ones on two hosts, and rows that must not be reported."""
    rows = [
        # id, queue, host, cpu, rss, heartbeat age (s), stopped, flagged, telemetry
        ("w-gpu", "m", "gpu-box", 12.5, 1000, 0, False, False,
         '{"load": [2.5, 1.0, 0.5], "gpu": ' + TWO_GPUS + "}"),
        # Older beat on the same host: its own series, but not the host's figures.
        ("w-gpu-old", "m", "gpu-box", 1.0, 500, 5, False, False,
         '{"load": [9.0, 9.0, 9.0], "gpu": [{"utilization_pct": 99, "memory_used_mib": 1,'
         ' "memory_total_mib": 2}]}'),
        ("w-cpu", "n", "cpu-box", 50.0, 2048, 0, False, False,
         '{"load": [0.75, 0.5, 0.25], "gpu": null, "cpu_pct": 62.5,'
         ' "mem_used_bytes": 1024, "mem_total_bytes": 4096}'),
        ("w-bad", "n", "bad-box", None, None, 0, False, False,
         '{"load": "high", "gpu": {"x": 1}, "cpu_pct": "busy", "mem_used_bytes": 1}'),
        ("w-stopped", "m", "gone-box", 5.0, 5, 0, True, False,
         '{"load": [4.0, 4.0, 4.0], "gpu": ' + TWO_GPUS + "}"),
        ("w-flagged", "m", "gone-box", 5.0, 5, 0, False, True, '{"load": [4.0, 4.0, 4.0]}'),
        ("w-stale", "m", "gone-box", 5.0, 5, 300, False, False, '{"load": [4.0, 4.0, 4.0]}'),
    ]  # fmt: skip
    for wid, queue, host, cpu, rss, age, stopped, flagged, telemetry in rows:
        conn.execute(
            "INSERT INTO queue_engine.workers (id, queue, host, pid, state, cpu_percent,"
            " rss_bytes, telemetry, heartbeat_at, stopped_at, flagged_dead_at) VALUES"
            " (%s, %s, %s, 1, 'idle', %s, %s, %s::jsonb, now() - make_interval(secs => %s),"
            " CASE WHEN %s THEN now() END, CASE WHEN %s THEN now() END)",
            (wid, queue, host, cpu, rss, telemetry, age, stopped, flagged),
        )


def proc(wid: str, queue: str, host: str, role: str = "worker") -> tuple[tuple[str, str], ...]:
    return (("host", host), ("queue", queue), ("role", role), ("worker_id", wid))


def gpu(host: str, index: str) -> tuple[tuple[str, str], ...]:
    return (("gpu", index), ("host", host))


def test_metrics_report_live_telemetry(server, fleet) -> None:
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    assert got[("queue_engine_database_up", ())] == 1  # the malformed row broke nothing
    cpu, rss = "queue_engine_worker_cpu_percent", "queue_engine_worker_rss_bytes"
    assert got[(cpu, proc("w-gpu", "m", "gpu-box"))] == 12.5
    assert got[(rss, proc("w-gpu", "m", "gpu-box"))] == 1000
    assert got[(cpu, proc("w-gpu-old", "m", "gpu-box"))] == 1.0
    assert got[(cpu, proc("w-cpu", "n", "cpu-box"))] == 50.0
    assert got[(rss, proc("w-cpu", "n", "cpu-box"))] == 2048
    # Per host: the newest live heartbeat's figures, one series per host.
    load = "queue_engine_host_load1"
    assert {k[1]: v for k, v in got.items() if k[0] == load} == {
        (("host", "cpu-box"),): 0.75,
        (("host", "gpu-box"),): 2.5,
    }
    # Host CPU and memory: only the host whose heartbeat reported them, as numbers.
    for name, value in (
        ("queue_engine_host_cpu_percent", 62.5),
        ("queue_engine_host_memory_used_bytes", 1024),
        ("queue_engine_host_memory_total_bytes", 4096),
    ):
        assert {k[1]: v for k, v in got.items() if k[0] == name} == {(("host", "cpu-box"),): value}
    util = "queue_engine_host_gpu_utilization_percent"
    used = "queue_engine_host_gpu_memory_used_bytes"
    total = "queue_engine_host_gpu_memory_total_bytes"
    assert got[(util, gpu("gpu-box", "0"))] == 37
    assert got[(used, gpu("gpu-box", "0"))] == 10240 * MIB
    assert got[(total, gpu("gpu-box", "0"))] == 81920 * MIB
    assert (util, gpu("gpu-box", "1")) not in got  # [N/A] on that GPU
    assert got[(used, gpu("gpu-box", "1"))] == 3 * MIB
    gpu_series = {k for k in got if k[0] in (util, used, total)}
    assert {dict(labels)["host"] for _, labels in gpu_series} == {"gpu-box"}  # none for cpu-box
    assert len(gpu_series) == 5
    # Stopped, flagged-dead, stale and malformed rows export nothing.
    reported = " ".join(str(k) for k in got)
    for absent in ("w-stopped", "w-flagged", "w-stale", "gone-box", "w-bad", "bad-box"):
        assert absent not in reported


def test_metrics_report_a_daemon_heartbeat_with_its_gpu(server, dsn, conn) -> None:
    import socket

    from queue_engine.daemon.heartbeat import Heartbeat, WorkersRow
    from queue_engine.daemon.telemetry import GpuProbe

    row = WorkersRow(
        dsn,
        SCHEMA,
        worker_id="orch-m",
        role="orchestrator",
        state=lambda: "leader",
        gpu=GpuProbe(runner=lambda argv, t: "55, 2048, 16384\n", which=lambda n: "/bin/" + n),
    )
    try:
        Heartbeat(row).run_once()
    finally:
        row.db.reset()
    host = socket.gethostname()
    (telemetry,) = conn.execute(
        "SELECT telemetry FROM queue_engine.workers WHERE id = 'orch-m'"
    ).fetchone()
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    assert got[("queue_engine_worker_rss_bytes", proc("orch-m", "", host, "orchestrator"))] > 0
    assert ("queue_engine_worker_cpu_percent", proc("orch-m", "", host, "orchestrator")) in got
    assert got[("queue_engine_host_load1", (("host", host),))] == telemetry["load"][0]
    assert got[("queue_engine_host_gpu_utilization_percent", gpu(host, "0"))] == 55
    assert got[("queue_engine_host_gpu_memory_used_bytes", gpu(host, "0"))] == 2048 * MIB


def test_metrics_omit_gpu_gauges_without_gpu_data(server, conn) -> None:
    conn.execute(
        "INSERT INTO queue_engine.workers (id, queue, host, pid, state, cpu_percent, telemetry)"
        " VALUES ('w1', 'm', 'h', 1, 'idle', 3.0, '{\"load\": [1.5, 1.0, 0.5], \"gpu\": null}'),"
        " ('w2', 'm', 'h', 2, 'idle', 4.0, NULL)"
    )
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    assert got[("queue_engine_host_load1", (("host", "h"),))] == 1.5
    assert got[("queue_engine_worker_cpu_percent", proc("w2", "m", "h"))] == 4.0
    assert not [k for k in got if "gpu" in k[0]]
    assert ("queue_engine_worker_rss_bytes", proc("w1", "m", "h")) not in got  # rss NULL


def test_metrics_report_scale_and_rate_limits(server, workload, conn: Any) -> None:
    from queue_engine.operator.controls import rate_queue, scale_queue

    scale_queue(conn, SCHEMA, "m", 3)
    rate_queue(conn, SCHEMA, "idle.r", 2.5, burst=1)
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    assert got[("queue_engine_queue_scale_limit", (("queue", "m"),))] == 3
    assert got[("queue_engine_queue_rate_limit", (("queue", "idle.r"),))] == 2.5
    # No limit, no sample: absent means unlimited (0 would mean "claim nothing").
    assert ("queue_engine_queue_scale_limit", (("queue", "idle.r"),)) not in got
    assert ("queue_engine_queue_rate_limit", (("queue", "m"),)) not in got


def test_metrics_mark_figures_above_the_stats_cap(server, workload, monkeypatch) -> None:
    """Above QUEUE_ENGINE_STATS_EXACT_CAP a figure is flagged, and the histogram is bounded."""
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    assert not [k for k in samples(text) if k[0] == "queue_engine_queue_figure_inexact"]

    monkeypatch.setenv("QUEUE_ENGINE_STATS_EXACT_CAP", "1")  # read at each scrape
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    got = samples(text)
    flagged = {
        dict(labels)["figure"]: dict(labels)["kind"]
        for name, labels in got
        if name == "queue_engine_queue_figure_inexact" and dict(labels)["queue"] == "m"
    }
    # 2 due jobs in one range, counted up to 1 + 1: an estimate or a lower bound.
    assert flagged["queued"] in ("estimate", "at_least")
    assert "delayed" not in flagged  # 1 delayed job: still exact
    assert flagged["out_15m"] == "estimate"  # the newest finished job only, extrapolated
    assert got[("queue_engine_job_duration_seconds_gcount", (("queue", "m"),))] == 1


# -- flow control: per-key limits and partitions -------------------------------------


def scrape(server: metrics.MetricsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    code, text = get(f"http://127.0.0.1:{server.port}/metrics")
    assert code == 200
    return samples(text)


def of(got: dict[Any, float], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (n, labels), value in got.items() if n == name}


def test_flow_gauges_of_keys_with_a_limit_and_partitions(server: Any, conn: Any) -> None:
    build_scene(conn)
    got = scrape(server)
    key = lambda k: (("key", k),)  # noqa: E731
    # Only keys with an operator's limit: report:daily (the jobs' own limit) is no series.
    assert of(got, "queue_engine_concurrency_running") == {
        key("src:erp"): 3,
        key("api:partner"): 2,
        key("held:key"): 0,
    }
    assert of(got, "queue_engine_concurrency_limit") == {
        key("src:erp"): 3,
        key("api:partner"): 10,
        key("held:key"): 0,
    }
    assert of(got, "queue_engine_concurrency_waiting") == {
        key("src:erp"): 5,
        key("api:partner"): 0,
        key("held:key"): 2,
    }
    assert of(got, "queue_engine_partition_queued") == {
        (("partition", k), ("queue", PARTITION_QUEUE)): q for k, (q, _) in PARTITIONS.items()
    }


def test_flow_gauge_labels_are_bounded(server: Any, conn: Any) -> None:
    conn.execute(
        "INSERT INTO queue_engine.concurrency_limits (key, max_running)"
        " SELECT 'k' || i, 1 FROM generate_series(1, %s) i",
        (flow_metrics.MAX_KEYS + 20,),
    )
    conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, partition_key)"
        " SELECT 'wide', 't', 'p' || i FROM generate_series(1, %s) i",
        (flow_metrics.MAX_PARTITIONS + 30,),
    )
    got = scrape(server)
    assert len(of(got, "queue_engine_concurrency_limit")) == flow_metrics.MAX_KEYS
    assert len(of(got, "queue_engine_partition_queued")) == flow_metrics.MAX_PARTITIONS
