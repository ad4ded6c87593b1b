"""The numbers operators look at: per-queue figures, the workers table, a job's timeline.

Why this module is long: it holds the records of the three views and the
definitions below in one place, so every face (CLI, dashboard, metrics)
reads one meaning of each figure.

Reading is split from arithmetic so each can be checked on its own: the
database does the counting and the percentiles in one statement per view
(``sql/stats_queues.sql``, ``sql/stats_workers.sql``, ``sql/show_job_events.sql``),
and the derived figures (rates, the replicas suggestion) are pure functions of
those counts, unit-tested without a server. ``queue-ctl stats``, ``workers``,
``show`` and ``top`` and the metrics scrape all read through this module, so
they can never disagree about what "queued" or "live" means.

Definitions (also in docs/operations.md):

- *queued*: claimable now (``status = 'queued'`` and ``available_at <= now``);
  *delayed*: queued but available later (scheduled, or backing off a retry).
- *wait time*: ``started_at - available_at`` of jobs started in the last
  15 minutes, i.e. how long a claimable job waited for a worker (a delayed
  job's delay and a retry's backoff are not counted as waiting).
- *run time*: ``duration_ms`` of jobs that succeeded or failed in the last
  15 minutes.
- *throughput*: jobs created (in) and finished in any final status (out) over
  the last minute and the last 15 minutes.
- *replicas suggestion*: Little's law, see :func:`replicas_suggestion`.
- *paused*: the queue is paused (``queue-ctl pause``): its workers claim nothing.
- *scale limit*: at most this many of the queue's workers claim (``queue-ctl scale``);
  *rate limit*: at most this many jobs started per second, in bursts of at most
  *rate burst* (``queue-ctl rate``); None: no limit.
- *parked*: live workers whose state is ``parked`` (a ``queue-ctl park`` matches
  them, or they hold no scale slot): alive, claiming nothing. They are counted in
  *live* too, so live minus parked is the workers that can claim.

Estimates at scale: no read of the stats statement goes past a cap
(``QUEUE_ENGINE_STATS_EXACT_CAP``, 10,000 by default) of index entries or rows,
so ``stats`` costs the same on a table of 10 million jobs as on one of 10,000.
Below the cap every figure is exact. Above it a figure is named in
:attr:`QueueStats.estimated` (extrapolated from the rows read, or for a
backlog the planner's estimate from the table's statistics) or in
:attr:`QueueStats.at_least` (the count of the rows read: a lower bound).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import settings
from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors

#: Busy fraction the replicas suggestion aims for: headroom for bursts and restarts.
TARGET_UTILISATION = 0.7
#: Window of the arrival rate and mean run time behind the suggestion (seconds).
SUGGESTION_WINDOW_S = 15 * 60.0
#: How the suggestion is computed, repeated in the ``--json`` output.
REPLICAS_FORMULA = (
    "ceil(arrival_rate_per_s * mean_run_s / target_utilisation), "
    "arrival_rate_per_s = jobs created in the last 15 min / 900, "
    "mean_run_s = mean duration of jobs succeeded or failed in the last 15 min, "
    "at least 1 while jobs are queued or running"
)


def dead_after_s() -> float:
    """Heartbeat age after which a worker counts as dead: the dead-worker sweep's rule.

    ``QUEUE_ENGINE_DEAD_AFTER_S``, else three ``QUEUE_ENGINE_HEARTBEAT_S`` (it
    was a fixed 30 s here, so under a non-default heartbeat ``queue-ctl
    workers`` and the orchestrator disagreed about who is dead).
    """
    return settings.dead_after_s()


# -- pure arithmetic -----------------------------------------------------------


def rate_per_s(count: int, window_s: float) -> float:
    """Average events per second over a window."""
    if window_s <= 0:
        raise ValueError(f"window_s must be > 0, got {window_s!r}")
    return count / window_s


def replicas_suggestion(
    arrival_rate_per_s: float,
    mean_run_s: float | None,
    *,
    backlog: int = 0,
    target_utilisation: float = TARGET_UTILISATION,
) -> int:
    """Workers a queue needs to keep up: Little's law with headroom.

    ``arrival_rate_per_s * mean_run_s`` is the average number of jobs in
    service (busy workers) needed to match the arrival rate; dividing by the
    target utilisation leaves headroom, and the result is rounded up. A queue
    with work waiting or running (``backlog`` > 0) gets at least one worker
    even when nothing arrived lately or no run time is known yet; an idle
    queue gets 0. Since workers run one job at a time, one worker per job in
    service is exact, not an estimate of threads.
    """
    if not 0 < target_utilisation <= 1:
        raise ValueError(f"target_utilisation must be in (0, 1], got {target_utilisation!r}")
    if arrival_rate_per_s < 0 or (mean_run_s is not None and mean_run_s < 0):
        raise ValueError("arrival rate and run time cannot be negative")
    needed = 0
    if mean_run_s is not None:
        load = arrival_rate_per_s * mean_run_s / target_utilisation
        # Round away float noise first (0.7 * 10 / 0.7 is 10.000000000000002).
        needed = math.ceil(round(load, 9))
    if backlog > 0:
        needed = max(needed, 1)
    return needed


def format_duration(seconds: float | None) -> str:
    """Short human duration for tables: ``850ms``, ``12.3s``, ``4m05s``, ``2h10m``, ``3d4h``."""
    if seconds is None:
        return "-"
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        minutes, secs = divmod(int(seconds), 60)
        return f"{minutes}m{secs:02d}s"
    if seconds < 86400:
        hours, rest = divmod(int(seconds), 3600)
        return f"{hours}h{rest // 60:02d}m"
    days, rest = divmod(int(seconds), 86400)
    return f"{days}d{rest // 3600}h"


def format_bytes(value: int | None) -> str:
    """Short human size: ``512B``, ``1.5K``, ``230.0M``, ``2.1G`` (binary units)."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"
        size /= 1024
    return f"{size:.1f}G"  # pragma: no cover - the loop always returns


# -- the records ---------------------------------------------------------------


#: How a figure that is not exact is marked before its value, in every view.
MARKS = {"exact": "", "estimate": "~", "at_least": "\N{GREATER-THAN OR EQUAL TO} "}


@dataclass(frozen=True, slots=True)
class QueueStats:
    """The figures of one queue, as ``queue-ctl stats`` shows them."""

    queue: str
    queued: int
    delayed: int
    running: int
    succeeded_1h: int
    failed_1h: int
    lost_1h: int
    canceled_1h: int
    in_1m: int
    in_15m: int
    out_1m: int
    out_15m: int
    oldest_queued_s: float | None
    wait_p50_s: float | None
    wait_p95_s: float | None
    wait_samples: int
    run_p50_s: float | None
    run_p95_s: float | None
    run_mean_s: float | None
    run_samples: int
    workers_live: int
    workers_parked: int
    workers_dead: int
    paused: bool = False
    scale_limit: int | None = None
    rate_limit: float | None = None
    rate_burst: int | None = None
    #: Figures that are estimates (the exact count stopped at the cap), by field name.
    estimated: tuple[str, ...] = ()
    #: Figures that are lower bounds (counted up to the cap, no estimate beyond it).
    at_least: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> QueueStats:
        """Build from a ``stats_queues`` row (counts arrive as ints, figures as floats).

        The row's ``queued_capped`` / ``delayed_capped`` (index ranges whose
        count stopped at the cap) are dropped: :func:`queue_stats` has already
        turned them into estimates or lower bounds.
        """
        fields = {k: v for k, v in row.items() if k not in ("queued_capped", "delayed_capped")}
        fields["estimated"] = tuple(fields.get("estimated") or ())
        fields["at_least"] = tuple(fields.get("at_least") or ())
        return cls(**fields)

    def exactness(self, name: str) -> str:
        """``exact``, ``estimate`` or ``at_least`` for the figure ``name``."""
        if name in self.estimated:
            return "estimate"
        if name in self.at_least:
            return "at_least"
        return "exact"

    def mark(self, *names: str) -> str:
        """The mark (:data:`MARKS`) of the least exact of ``names``: ``~`` wins over ``≥``.

        One rule for every view (``queue-ctl stats``/``top``, queue-web), so a
        figure reads the same wherever it is shown.
        """
        kinds = {self.exactness(name) for name in names}
        for kind in ("estimate", "at_least"):
            if kind in kinds:
                return MARKS[kind]
        return ""

    @property
    def arrival_rate_per_s(self) -> float:
        """Jobs created per second over the suggestion window."""
        return rate_per_s(self.in_15m, SUGGESTION_WINDOW_S)

    @property
    def replicas_suggested(self) -> int:
        """Workers this queue needs (see :func:`replicas_suggestion`)."""
        return replicas_suggestion(
            self.arrival_rate_per_s, self.run_mean_s, backlog=self.queued + self.running
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures, with the rates and the suggestion and how it was computed."""
        out = asdict(self)
        out["estimated"] = list(self.estimated)
        out["at_least"] = list(self.at_least)
        out["throughput_per_s"] = {
            "in_1m": rate_per_s(self.in_1m, 60.0),
            "in_15m": rate_per_s(self.in_15m, 900.0),
            "out_1m": rate_per_s(self.out_1m, 60.0),
            "out_15m": rate_per_s(self.out_15m, 900.0),
        }
        out["replicas"] = {
            "suggested": self.replicas_suggested,
            "arrival_rate_per_s": self.arrival_rate_per_s,
            "mean_run_s": self.run_mean_s,
            "target_utilisation": TARGET_UTILISATION,
            "formula": REPLICAS_FORMULA,
        }
        return out


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One row of the workers table, with its heartbeat age and a liveness verdict."""

    id: str
    role: str
    host: str
    pid: int
    queue: str | None
    state: str
    current_job_id: int | None
    started_at: datetime
    heartbeat_at: datetime
    stopped_at: datetime | None
    flagged_dead_at: datetime | None
    heartbeat_age_s: float
    rss_bytes: int | None
    cpu_percent: float | None
    liveness: str
    telemetry: dict[str, Any] | None = None
    #: The affinity key the worker is warm for (it prefers jobs naming it).
    warm_key: str | None = None
    #: When ``queue-ctl stop`` asked the worker to exit after its current job.
    stop_requested_at: datetime | None = None
    #: ``queue-ctl stop --now``: the running job is given back at once (migration 0030).
    stop_now: bool = False

    @property
    def stop_requested(self) -> bool:
        """Asked to stop and not stopped yet: it exits after its current job."""
        return self.stop_requested_at is not None and self.stopped_at is None

    @property
    def load_1m(self) -> float | None:
        """The host's 1-minute load average from the last heartbeat (workers only)."""
        load = (self.telemetry or {}).get("load")
        if isinstance(load, list) and load and isinstance(load[0], int | float):
            return float(load[0])
        return None

    @property
    def host_cpu_pct(self) -> float | None:
        """The host's CPU use in percent at the last heartbeat (psutil), if reported."""
        return _number((self.telemetry or {}).get("cpu_pct"))

    @property
    def host_memory(self) -> tuple[int, int] | None:
        """The host's memory (in use, in all) in bytes at the last heartbeat, if reported."""
        doc = self.telemetry or {}
        used, total = _number(doc.get("mem_used_bytes")), _number(doc.get("mem_total_bytes"))
        if used is not None and total:
            return int(used), int(total)
        return None

    @property
    def gpu_memory_mib(self) -> float | None:
        """GPU memory this process holds (MiB), from the host's ``gpu_processes``, if listed."""
        procs = (self.telemetry or {}).get("gpu_processes")
        if not isinstance(procs, list):
            return None
        mine = [
            _number(p.get("memory_used_mib"))
            for p in procs
            if isinstance(p, dict) and p.get("pid") == self.pid
        ]
        figures = [m for m in mine if m is not None]
        return sum(figures) if figures else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (datetimes as ISO 8601), with the ``stop_requested`` verdict."""
        out = {
            k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(self).items()
        }
        out["stop_requested"] = self.stop_requested
        return out


def _number(value: Any) -> float | None:
    """A JSON number as a float; None for null, text or a boolean (an int in Python)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One entry of a job's timeline."""

    id: int
    at: datetime
    kind: str
    from_status: str | None
    to_status: str | None
    attempt: int | None
    worker_id: str | None
    message: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``at`` as ISO 8601)."""
        out = asdict(self)
        out["at"] = self.at.isoformat()
        return out


# -- reading -------------------------------------------------------------------


def exact_cap() -> int:
    """``QUEUE_ENGINE_STATS_EXACT_CAP``: figures are exact up to this many jobs per read."""
    return settings.STATS_EXACT_CAP.read()


def split_backlog(
    queued: int,
    delayed: int,
    *,
    queued_capped: bool,
    delayed_capped: bool,
    estimate: float | None,
) -> tuple[int, int, dict[str, str]]:
    """A queue's queued and delayed figures once a count stopped at the cap.

    ``queued`` / ``delayed`` are the counts read (each a lower bound when its
    ``*_capped``); ``estimate`` is the planner's estimate of the whole backlog
    (queued + delayed). When one count is exact, the other is the estimate
    minus it; an estimate below what was counted is stale (statistics older
    than the backlog), so the count read is kept as a lower bound. When both
    stopped at the cap the split is unknown: both are lower bounds. Returns
    the two figures and ``{field: "estimate" | "at_least"}`` for those not exact.
    """
    kinds: dict[str, str] = {}
    if queued_capped and delayed_capped:
        return queued, delayed, {"queued": "at_least", "delayed": "at_least"}
    if queued_capped:
        guess = None if estimate is None else round(estimate) - delayed
        if guess is not None and guess > queued:
            return guess, delayed, {"queued": "estimate"}
        return queued, delayed, {"queued": "at_least"}
    if delayed_capped:
        guess = None if estimate is None else round(estimate) - queued
        if guess is not None and guess > delayed:
            return queued, guess, {"delayed": "estimate"}
        return queued, delayed, {"delayed": "at_least"}
    return queued, delayed, kinds


def backlog_estimate(conn: psycopg.Connection[Any], schema: str, queue: str) -> float | None:
    """The planner's estimate of a queue's backlog (``sql/estimate_backlog.sql``), no rows read.

    EXPLAIN plans the statement with the queue's name bound, so the estimate
    comes from the table's statistics (the (queue, status) MCV list of the
    ``stats_estimates`` migration) scaled to the relation's current size. None
    when the plan carries no estimate.
    """
    with schema_errors(schema):
        row = conn.execute(
            "EXPLAIN (FORMAT JSON) " + queries.query("estimate_backlog", schema), {"queue": queue}
        ).fetchone()
    if row is None:
        return None
    document = row[0]
    if isinstance(document, str):
        document = json.loads(document)
    rows = document[0]["Plan"].get("Plan Rows")
    return float(rows) if rows is not None else None


def queue_stats(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    queue: str | None = None,
    now: datetime | None = None,
    dead_after: float | None = None,
    cap: int | None = None,
) -> list[QueueStats]:
    """Per-queue figures, one statement; ``now`` pins the clock (None: the database's).

    ``cap``: exact up to this many jobs per read (None: ``QUEUE_ENGINE_STATS_EXACT_CAP``);
    a queue whose backlog count stopped at it costs one more EXPLAIN for its estimate.
    """
    params = {
        "now": now,
        "queue": queue,
        "dead_after_s": dead_after if dead_after is not None else dead_after_s(),
        "cap": cap if cap is not None else exact_cap(),
    }
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("stats_queues", schema), params)
        rows = cur.fetchall()
    out = []
    for row in rows:
        queued_capped = bool(row["queued_capped"])
        delayed_capped = bool(row["delayed_capped"])
        if queued_capped or delayed_capped:
            estimate = None
            if not (queued_capped and delayed_capped):
                estimate = backlog_estimate(conn, schema, row["queue"])
            queued, delayed, kinds = split_backlog(
                int(row["queued"]),
                int(row["delayed"]),
                queued_capped=queued_capped,
                delayed_capped=delayed_capped,
                estimate=estimate,
            )
            row = {**row, "queued": queued, "delayed": delayed}
            row["estimated"] = [
                *row["estimated"],
                *(k for k, v in kinds.items() if v == "estimate"),
            ]
            row["at_least"] = [*row["at_least"], *(k for k, v in kinds.items() if v == "at_least")]
        out.append(QueueStats.from_row(row))
    return out


def workers(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    now: datetime | None = None,
    dead_after: float | None = None,
) -> list[WorkerRow]:
    """Every worker row (workers, orchestrators, schedulers), with liveness."""
    params = {
        "now": now,
        "dead_after_s": dead_after if dead_after is not None else dead_after_s(),
    }
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("stats_workers", schema), params)
        return [WorkerRow(**r) for r in cur.fetchall()]


def job_events(
    conn: psycopg.Connection[Any],
    schema: str,
    job_id: int,
    *,
    after: int | None = None,
    limit: int | None = None,
) -> list[JobEvent]:
    """The job's events, oldest first (empty for an unknown or pruned job).

    ``after``: only events after that event id (a cursor, for a timeline that
    is read again as it grows); ``limit``: at most that many.
    """
    params = {"id": job_id, "after": after, "limit": limit}
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("show_job_events", schema), params)
        return [JobEvent(**r) for r in cur.fetchall()]
