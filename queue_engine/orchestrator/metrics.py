"""Prometheus metrics and the ``/health`` probe, served by the orchestrator.

Why this module is long: it is the whole Prometheus surface of the
orchestrator (the scrape-time collector, the telemetry families, the process
counters and gauges, and the HTTP server with ``/health``); each part is small,
and every metric's name, help and type stand next to the others, so adding or
renaming one is one edit and ``docs/operations.md`` is checked against one list.

Three kinds of figures:

- *Queue state*, read from the database on each scrape by :class:`QueueCollector`
  with four cheap statements (``sql/stats_queues.sql``, the same figures as
  ``queue-ctl stats``; ``sql/metrics_workers.sql``; ``sql/metrics_durations.sql``;
  ``sql/metrics_telemetry.sql``), and the flow-control gauges of
  :mod:`~queue_engine.orchestrator.flow_metrics` (per-key limits, per-partition
  depth: a bounded statement each). Nothing is cached between scrapes, so every
  orchestrator (leader or standby) reports the same numbers and a restart
  loses nothing. Rolling-window figures are gauges; the run-time distribution is
  a gauge histogram over the last 15 minutes.
- *Heartbeat telemetry* of the live fleet (:func:`telemetry_families`): CPU %
  and RSS per live worker, orchestrator and scheduler row, and per host the
  load average and GPU figures of its latest heartbeat that carried them. Only
  live rows are read, so series come and go with the processes.
- *Process counters* the orchestrator's sweeps increment, through
  :func:`count` (``metrics.count("reaper_requeued", n)``). They live in this
  module in plain Python, so calling :func:`count` never needs
  prometheus-client; they are exposed as ``queue_engine_<name>_total``.
  *Process gauges* (:func:`set_gauge`) are the same for a figure a leader
  check measures, e.g. ``queue_engine_workflow_stuck_nodes``.

:func:`start_metrics_server` serves ``/metrics`` (Prometheus text format) and
``/health`` (JSON: 200 ``{"status": "ok", "leader": ..., "db": "ok"}`` when the
database answers ``SELECT 1``, 503 otherwise) from a daemon thread. The
exposition part needs the optional extra: ``pip install 'queue-engine[metrics]'``.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import LazyConnection, first_line
from queue_engine.foundation.errors import ConfigError
from queue_engine.operator import stats
from queue_engine.orchestrator.flow_metrics import flow_families

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

log = logging.getLogger("queue_engine.metrics")

PREFIX = "queue_engine"
#: Upper bounds (seconds) of the run-time histogram buckets.
DURATION_BUCKETS_S = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0)
#: Window of the run-time histogram (seconds).
DURATION_WINDOW_S = 900.0
#: Bytes per MiB (nvidia-smi reports GPU memory in MiB).
MIB = 1024 * 1024
#: A scrape's statements give up after this long rather than pile up on a sick database.
SCRAPE_STATEMENT_TIMEOUT_MS = 5000
#: Connect timeout of the scrape and health connections (seconds).
CONNECT_TIMEOUT_S = 3

#: Counters the orchestrator increments; listed so they are exported (as 0) from the start.
KNOWN_COUNTERS: dict[str, str] = {
    "reaper_requeued": "Jobs the reaper put back in their queue after their lease expired.",
    "reaper_lost": "Jobs the reaper marked lost (lease expired on the last attempt).",
    "reaper_canceled": "Jobs the reaper canceled (lease expired, cancel requested).",
    "dead_workers_flagged": "Workers flagged dead by the dead-worker sweep.",
    "fast_recovered": "Jobs recovered at once because their worker's session ended.",
    "pruned_jobs": "Finished jobs deleted by retention.",
    "pruned_events": "Job events deleted with their jobs by retention.",
    "pruned_workers": "Stale worker rows deleted by retention.",
    "pruned_control_events": "Rows of the audit of controls deleted by retention.",
    "pruned_workflows": "Finished workflows deleted as a whole by retention.",
    "archived_jobs": "Succeeded jobs moved from jobs to jobs_archive by the archiver.",
    "vacuums": "VACUUMs of jobs the vacuumer ran to clear the claim index during a drain.",
    "vacuum_seconds": "Seconds the vacuumer's VACUUMs of jobs took.",
    "workflow_inputs_timed_out": "Input nodes failed because their value did not come in time.",
    "workflow_stuck_checks": "Runs of the leader's 'no stuck workflow node' check.",
}
#: Gauges the orchestrator's leader sets; exported (as 0) from the start.
KNOWN_GAUGES: dict[str, str] = {
    "workflow_stuck_nodes": (
        "Workflow nodes the last 'no stuck node' check found waiting with every parent ended "
        "(an engine bug to report; always 0 in a healthy system)."
    ),
}
_COUNTER_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

_counters_lock = threading.Lock()
_counters: dict[str, float] = dict.fromkeys(KNOWN_COUNTERS, 0.0)
_gauges: dict[str, float] = dict.fromkeys(KNOWN_GAUGES, 0.0)


def count(name: str, amount: float = 1) -> None:
    """Add ``amount`` to the process counter ``name`` (exported as ``queue_engine_<name>_total``).

    Cheap and safe from any thread; works without prometheus-client installed.
    """
    if not _COUNTER_NAME.match(name):
        raise ValueError(f"invalid counter name {name!r}: use snake_case, e.g. 'reaper_requeued'")
    if amount < 0:
        raise ValueError(f"counter {name!r} can only go up, got {amount!r}")
    with _counters_lock:
        _counters[name] = _counters.get(name, 0.0) + amount


def counters() -> dict[str, float]:
    """A snapshot of the process counters."""
    with _counters_lock:
        return dict(_counters)


def reset_counters() -> None:
    """Set every counter and process gauge back to 0 (tests)."""
    with _counters_lock:
        for name in list(_counters):
            _counters[name] = 0.0
        for name in list(_gauges):
            _gauges[name] = 0.0


def set_gauge(name: str, value: float) -> None:
    """Set the process gauge ``name`` (exported as ``queue_engine_<name>``).

    For a figure a leader-only check measures (the last check's finding), not
    one a scrape can read from the database cheaply.
    """
    if not _COUNTER_NAME.match(name):
        raise ValueError(
            f"invalid gauge name {name!r}: use snake_case, e.g. 'workflow_stuck_nodes'"
        )
    with _counters_lock:
        _gauges[name] = float(value)


def gauges() -> dict[str, float]:
    """A snapshot of the process gauges."""
    with _counters_lock:
        return dict(_gauges)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, list | tuple) else 0


def record_result(service: str, result: Any) -> None:
    """Count what one leader-service run did, from its result object (duck-typed).

    One call fits every service, so the orchestrator can hook it once (after
    each ``run_once``) instead of in each service: ``reaper`` (``requeued``,
    ``lost``, ``canceled``), ``dead_workers`` (``flagged``) and
    ``fast_recovery`` (``workers``, each with ``requeued``/``lost``/``canceled``
    job ids). Other services (the pruner counts itself) are ignored.
    """
    if result is None:
        return
    if service == "reaper":
        for kind in ("requeued", "lost", "canceled"):
            count(f"reaper_{kind}", _size(getattr(result, kind, None)))
    elif service == "dead_workers":
        count("dead_workers_flagged", _size(getattr(result, "flagged", None)))
    elif service == "fast_recovery":
        jobs = 0
        for worker in getattr(result, "workers", None) or []:
            for kind in ("requeued", "lost", "canceled"):
                jobs += _size(getattr(worker, kind, None))
        count("fast_recovered", jobs)


def require_prometheus_client() -> None:
    """Raise a ConfigError that says how to install the extra when prometheus-client is missing."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise ConfigError(
            "the metrics endpoint needs prometheus-client: pip install 'queue-engine[metrics]'"
        ) from None


class _Db:
    """One lazily opened connection shared by scrapes and health checks, one user at a time."""

    def __init__(self, dsn: str) -> None:
        self.conn = LazyConnection(dsn, writable=False, connect_timeout=CONNECT_TIMEOUT_S)
        self.lock = threading.Lock()

    def get(self) -> psycopg.Connection[Any]:
        """Return the connection, opening it (with a statement timeout) if needed."""
        fresh = not self.conn.is_open
        conn = self.conn.get()
        if fresh:
            conn.execute(f"SET statement_timeout = {int(SCRAPE_STATEMENT_TIMEOUT_MS)}")
        return conn


class QueueCollector:
    """A prometheus-client collector that reads the queue state on each scrape."""

    def __init__(self, dsn: str, schema: str, *, dead_after: float | None = None) -> None:
        self.schema = schema
        self.dead_after = dead_after if dead_after is not None else stats.dead_after_s()
        self.db = _Db(dsn)

    def collect(self) -> Iterator[Metric]:
        """Yield every metric family; database figures only when the database answers."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        up = GaugeMetricFamily(
            f"{PREFIX}_database_up", "1 when the last scrape could read the database, else 0."
        )
        families: list[Metric] = []
        with self.db.lock:
            try:
                families = list(self._from_database(self.db.get()))
                up.add_metric([], 1)
            except Exception as exc:  # a scrape must never raise
                self.db.conn.reset()
                log.warning("metrics.scrape_failed error=%r", first_line(exc))
                up.add_metric([], 0)
        yield up
        yield from families
        for name, value in sorted(counters().items()):
            family = CounterMetricFamily(
                f"{PREFIX}_{name}", KNOWN_COUNTERS.get(name, f"Process counter {name}.")
            )
            family.add_metric([], value)
            yield family
        for name, value in sorted(gauges().items()):
            gauge = GaugeMetricFamily(
                f"{PREFIX}_{name}", KNOWN_GAUGES.get(name, f"Process gauge {name}.")
            )
            gauge.add_metric([], value)
            yield gauge

    def _from_database(self, conn: psycopg.Connection[Any]) -> Iterator[Metric]:
        from prometheus_client.core import GaugeHistogramMetricFamily, GaugeMetricFamily

        rows = stats.queue_stats(conn, self.schema, dead_after=self.dead_after)
        depth = GaugeMetricFamily(
            f"{PREFIX}_queue_jobs",
            "Jobs per queue and state (queued: claimable now; delayed: available later).",
            labels=["queue", "state"],
        )
        oldest = GaugeMetricFamily(
            f"{PREFIX}_queue_oldest_queued_seconds",
            "Age of the oldest claimable job (since it became available), 0 when none.",
            labels=["queue"],
        )
        finished = GaugeMetricFamily(
            f"{PREFIX}_queue_finished_last_hour",
            "Jobs finished in the last hour, by final status.",
            labels=["queue", "status"],
        )
        throughput = GaugeMetricFamily(
            f"{PREFIX}_queue_throughput_per_second",
            "Jobs created (in) or finished (out) per second over a window.",
            labels=["queue", "direction", "window"],
        )
        wait = GaugeMetricFamily(
            f"{PREFIX}_queue_wait_seconds",
            "Wait time (started_at - available_at) quantiles over the last 15 minutes.",
            labels=["queue", "quantile"],
        )
        workers_q = GaugeMetricFamily(
            f"{PREFIX}_queue_workers",
            "Workers of a queue by liveness (live, parked, dead).",
            labels=["queue", "liveness"],
        )
        replicas = GaugeMetricFamily(
            f"{PREFIX}_queue_replicas_suggested",
            "Workers needed: ceil(arrival rate x mean run time / 0.7), min 1 with work waiting.",
            labels=["queue"],
        )
        paused = GaugeMetricFamily(
            f"{PREFIX}_queue_paused",
            "1 while the queue is paused (queue-ctl pause): its workers claim nothing.",
            labels=["queue"],
        )
        scale = GaugeMetricFamily(
            f"{PREFIX}_queue_scale_limit",
            "Most workers of the queue that may claim at once (queue-ctl scale); absent: no limit.",
            labels=["queue"],
        )
        rate = GaugeMetricFamily(
            f"{PREFIX}_queue_rate_limit",
            "Most jobs of the queue started per second (queue-ctl rate); absent: no limit.",
            labels=["queue"],
        )
        inexact = GaugeMetricFamily(
            f"{PREFIX}_queue_figure_inexact",
            "1 for each figure above QUEUE_ENGINE_STATS_EXACT_CAP: an estimate or a lower bound.",
            labels=["queue", "figure", "kind"],
        )
        for q in rows:
            for figure in (*q.estimated, *q.at_least):
                inexact.add_metric([q.queue, figure, q.exactness(figure)], 1)
            for state, value in (
                ("queued", q.queued),
                ("delayed", q.delayed),
                ("running", q.running),
            ):
                depth.add_metric([q.queue, state], value)
            oldest.add_metric([q.queue], q.oldest_queued_s or 0.0)
            for status, value in (
                ("succeeded", q.succeeded_1h),
                ("failed", q.failed_1h),
                ("lost", q.lost_1h),
                ("canceled", q.canceled_1h),
            ):
                finished.add_metric([q.queue, status], value)
            for direction, window, n, seconds in (
                ("in", "1m", q.in_1m, 60.0),
                ("in", "15m", q.in_15m, 900.0),
                ("out", "1m", q.out_1m, 60.0),
                ("out", "15m", q.out_15m, 900.0),
            ):
                throughput.add_metric([q.queue, direction, window], stats.rate_per_s(n, seconds))
            if q.wait_p50_s is not None and q.wait_p95_s is not None:
                wait.add_metric([q.queue, "0.5"], q.wait_p50_s)
                wait.add_metric([q.queue, "0.95"], q.wait_p95_s)
            workers_q.add_metric([q.queue, "live"], q.workers_live)
            workers_q.add_metric([q.queue, "parked"], q.workers_parked)
            workers_q.add_metric([q.queue, "dead"], q.workers_dead)
            replicas.add_metric([q.queue], q.replicas_suggested)
            paused.add_metric([q.queue], 1 if q.paused else 0)
            if q.scale_limit is not None:
                scale.add_metric([q.queue], q.scale_limit)
            if q.rate_limit is not None:
                rate.add_metric([q.queue], q.rate_limit)
        yield from (depth, oldest, finished, throughput, wait, workers_q, replicas, paused)
        yield from (scale, rate, inexact)
        yield from flow_families(conn, self.schema, [q.queue for q in rows])

        workers = GaugeMetricFamily(
            f"{PREFIX}_workers",
            "Rows of the workers table by role, queue, reported state and liveness.",
            labels=["role", "queue", "state", "liveness"],
        )
        for role, queue, state, liveness, n in conn.execute(
            queries.query("metrics_workers", self.schema), {"dead_after_s": self.dead_after}
        ):
            workers.add_metric([role, queue, state, liveness], n)
        yield workers

        durations = GaugeHistogramMetricFamily(
            f"{PREFIX}_job_duration_seconds",
            "Run time of jobs that succeeded or failed in the last 15 minutes "
            "(at most QUEUE_ENGINE_STATS_EXACT_CAP newest).",
            labels=["queue"],
        )
        per_queue: dict[str, tuple[list[int], float]] = {}
        for queue, bucket, n, total_s in conn.execute(
            queries.query("metrics_durations", self.schema),
            {
                "bounds_s": list(DURATION_BUCKETS_S),
                "window_s": DURATION_WINDOW_S,
                "cap": stats.exact_cap(),
            },
        ):
            counts, total = per_queue.setdefault(queue, ([0] * (len(DURATION_BUCKETS_S) + 1), 0.0))
            counts[int(bucket)] += int(n)
            per_queue[queue] = (counts, total + float(total_s))
        for queue, (counts, total) in sorted(per_queue.items()):
            durations.add_metric([queue], histogram_buckets(counts), total)
        yield durations

        yield from telemetry_families(
            conn.execute(
                queries.query("metrics_telemetry", self.schema), {"dead_after_s": self.dead_after}
            )
        )


def _json_number(value: Any) -> float | None:
    """A JSON number as a float; None for null, text or booleans (bool is an int in Python)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def gpu_figures(entry: Any) -> tuple[float | None, float | None, float | None]:
    """One ``telemetry.gpu`` entry as (utilisation %, memory used bytes, memory total bytes).

    Tolerant: an entry that is not an object, or a figure the GPU could not
    report (null), gives None for that figure, and the scrape goes on.
    """
    if not isinstance(entry, dict):
        return None, None, None
    util = _json_number(entry.get("utilization_pct"))
    used = _json_number(entry.get("memory_used_mib"))
    total = _json_number(entry.get("memory_total_mib"))
    return (
        util,
        None if used is None else used * MIB,
        None if total is None else total * MIB,
    )


def telemetry_families(rows: Iterable[tuple[Any, ...]]) -> list[Metric]:
    """Gauges from ``sql/metrics_telemetry.sql`` rows (live rows, by host, newest first).

    Per process (labels ``worker_id``, ``role``, ``queue``, ``host``): CPU %
    and RSS, when reported. Per host: the 1-minute load, CPU % and memory
    (in use, in all), and each GPU (label ``gpu``: its index in the probe's
    list, NVIDIA's first) from the newest row that has them,
    because every process on a host reports the same load and GPUs and one
    series per host is what a dashboard wants. No GPU gauges for a host
    without GPU data.
    """
    from prometheus_client.core import GaugeMetricFamily

    proc_labels = ["worker_id", "role", "queue", "host"]
    cpu = GaugeMetricFamily(
        f"{PREFIX}_worker_cpu_percent",
        "CPU % of a live worker, orchestrator or scheduler process, from its last heartbeat.",
        labels=proc_labels,
    )
    rss = GaugeMetricFamily(
        f"{PREFIX}_worker_rss_bytes",
        "Resident memory of a live worker, orchestrator or scheduler process (last heartbeat).",
        labels=proc_labels,
    )
    load1 = GaugeMetricFamily(
        f"{PREFIX}_host_load1",
        "1-minute load average of a host, from its newest live heartbeat that reported one.",
        labels=["host"],
    )
    gpu_util = GaugeMetricFamily(
        f"{PREFIX}_host_gpu_utilization_percent",
        "GPU utilisation (nvidia-smi, rocm-smi) of a host's GPU, from its newest live heartbeat with GPUs.",
        labels=["host", "gpu"],
    )
    gpu_used = GaugeMetricFamily(
        f"{PREFIX}_host_gpu_memory_used_bytes",
        "GPU memory in use (nvidia-smi, rocm-smi) of a host's GPU, from its newest live heartbeat with GPUs.",
        labels=["host", "gpu"],
    )
    gpu_total = GaugeMetricFamily(
        f"{PREFIX}_host_gpu_memory_total_bytes",
        "GPU memory size (nvidia-smi, rocm-smi) of a host's GPU, from its newest live heartbeat with GPUs.",
        labels=["host", "gpu"],
    )
    host_cpu = GaugeMetricFamily(
        f"{PREFIX}_host_cpu_percent",
        "CPU use of a host in percent (psutil), from its newest live heartbeat that reported it.",
        labels=["host"],
    )
    mem_used = GaugeMetricFamily(
        f"{PREFIX}_host_memory_used_bytes",
        "Memory in use on a host (total - available), from its newest live heartbeat with it.",
        labels=["host"],
    )
    mem_total = GaugeMetricFamily(
        f"{PREFIX}_host_memory_total_bytes",
        "Memory of a host in all, from its newest live heartbeat that reported it.",
        labels=["host"],
    )
    load_done: set[str] = set()
    gpu_done: set[str] = set()
    cpu_done: set[str] = set()
    mem_done: set[str] = set()
    for row in rows:
        worker_id, role, queue, host, cpu_percent, rss_bytes, load, gpus = row[:8]
        cpu_host, used, total = row[8:11]
        if cpu_host is not None and host not in cpu_done:
            cpu_done.add(host)
            host_cpu.add_metric([host], float(cpu_host))
        if used is not None and total is not None and host not in mem_done:
            mem_done.add(host)
            mem_used.add_metric([host], float(used))
            mem_total.add_metric([host], float(total))
        labels = [worker_id, role, queue, host]
        if cpu_percent is not None:
            cpu.add_metric(labels, float(cpu_percent))
        if rss_bytes is not None:
            rss.add_metric(labels, float(rss_bytes))
        if load is not None and host not in load_done:
            load_done.add(host)
            load1.add_metric([host], float(load))
        if isinstance(gpus, list) and host not in gpu_done:
            gpu_done.add(host)
            for index, entry in enumerate(gpus):
                for family, value in zip(
                    (gpu_util, gpu_used, gpu_total), gpu_figures(entry), strict=True
                ):
                    if value is not None:
                        family.add_metric([host, str(index)], value)
    return [cpu, rss, load1, host_cpu, mem_used, mem_total, gpu_util, gpu_used, gpu_total]


def histogram_buckets(counts: list[int]) -> list[tuple[str, float]]:
    """Turn per-bucket counts (one per bound, then +Inf) into cumulative ``(le, count)`` pairs."""
    if len(counts) != len(DURATION_BUCKETS_S) + 1:
        raise ValueError("one count per bound plus one for +Inf")
    out: list[tuple[str, float]] = []
    running = 0
    for bound, n in zip((*map(repr, DURATION_BUCKETS_S), "+Inf"), counts, strict=True):
        running += n
        out.append((bound, float(running)))
    return out


@dataclass
class MetricsServer:
    """A running metrics/health HTTP server; :meth:`stop` shuts it down (safe twice)."""

    httpd: ThreadingHTTPServer
    thread: threading.Thread
    collector: QueueCollector

    @property
    def port(self) -> int:
        """The port actually bound (useful with port 0)."""
        return int(self.httpd.server_address[1])

    @property
    def host(self) -> str:
        """The address bound."""
        return str(self.httpd.server_address[0])

    def stop(self) -> None:
        """Stop serving, wait for the thread, close the database connection."""
        if self.thread.is_alive():
            self.httpd.shutdown()
            self.thread.join()
        self.httpd.server_close()
        with self.collector.db.lock:
            self.collector.db.conn.reset()


def _health(collector: QueueCollector, is_leader: Callable[[], bool]) -> tuple[int, dict[str, Any]]:
    """Check the database with ``SELECT 1``: (200, ok) or (503, error)."""
    try:
        leader = bool(is_leader())
    except Exception:
        leader = False
    with collector.db.lock:
        try:
            collector.db.get().execute("SELECT 1").fetchone()
        except Exception as exc:
            collector.db.conn.reset()
            return 503, {"status": "error", "leader": leader, "db": first_line(exc)}
    return 200, {"status": "ok", "leader": leader, "db": "ok"}


def start_metrics_server(
    dsn: str,
    schema: str,
    port: int,
    host: str = "127.0.0.1",
    *,
    is_leader: Callable[[], bool] = lambda: False,
    dead_after: float | None = None,
) -> MetricsServer:
    """Serve ``/metrics`` and ``/health`` on ``host:port`` from a daemon thread; return a handle.

    ``port`` 0 picks a free port (read it back from ``handle.port``). Raises
    :class:`~queue_engine.foundation.errors.ConfigError` when prometheus-client is missing
    or the address cannot be bound.
    """
    require_prometheus_client()
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

    collector = QueueCollector(dsn, schema, dead_after=dead_after)
    registry: CollectorRegistry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    class Handler(BaseHTTPRequestHandler):
        """``GET /metrics`` and ``GET /health``; anything else is 404."""

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, CONTENT_TYPE_LATEST, generate_latest(registry))
            elif path in ("/health", "/healthz"):
                code, body = _health(collector, is_leader)
                self._send(code, "application/json", json.dumps(body).encode())
            else:
                self._send(
                    404, "text/plain; charset=utf-8", b"not found: try /metrics or /health\n"
                )

        def _send(self, code: int, content_type: str, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("metrics.request %s", format % args)

    try:
        httpd = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, name="queue-engine-metrics", daemon=True)
    thread.start()
    log.info("metrics.serving host=%s port=%s", host, httpd.server_address[1])
    return MetricsServer(httpd, thread, collector)
