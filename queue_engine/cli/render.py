"""How ``queue-ctl`` shows things: tables, job listings and JSON, as lines of text.

Why this module is long: it is every table ``queue-ctl`` prints (jobs,
queues, workers with their host figures, controls, schedules); split by
table, each piece would import the same column helpers, and the tables that
share columns (``stats`` and ``top``) would drift apart.

Every function here is pure (values in, strings out; no database, no
printing except :func:`print_json`), so one rendering serves every command
that shows the same thing (``status`` and ``show`` print a job the same way;
``stats`` and ``top`` share the queue table) and the command modules only
fetch and echo. The figures come from :mod:`queue_engine.operator.stats`, so the
tables, ``--json`` and the metrics endpoint always agree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any

import click

from queue_engine.operator import job_display, stats

if TYPE_CHECKING:  # types only: loading the pruner and the schedule store costs every command
    from queue_engine.operator.controls import Controls
    from queue_engine.orchestrator.pruner import PruneResult
    from queue_engine.producer.jobs import Job
    from queue_engine.scheduler.store import ScheduleRow

Row = list[str]


def print_json(value: Any) -> None:
    """Print a JSON document (datetimes and other objects as strings)."""
    click.echo(json.dumps(value, indent=2, default=str, sort_keys=False))


def table(header: Row, rows: list[Row], right: set[int] | None = None) -> list[str]:
    """Align columns (numbers right-aligned by index); empty tables keep their header."""
    right = right or set()
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]

    def line(cells: Row) -> str:
        parts = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return [line(header), *(line(r) for r in rows)]


# -- jobs ------------------------------------------------------------------------------


#: Event kinds of a running attempt that ended without a finish from its worker
#: (``give_back_jobs()``): fast recovery's requeue, the reaper's, and the end of
#: the last attempt. A ``canceled`` give-back is left out: the job was unwanted.
DEATH_KINDS = frozenset({"recovered", "reaped", "lost"})


@dataclass(frozen=True, slots=True)
class Deaths:
    """How often a worker process died while running a job, since its last retry."""

    count: int
    session_ended: int
    lease_expired: int

    def to_dict(self) -> dict[str, int]:
        """JSON-ready."""
        return {
            "count": self.count,
            "session_ended": self.session_ended,
            "lease_expired": self.lease_expired,
        }


def deaths(events: list[stats.JobEvent]) -> Deaths:
    """Count the give-backs in a job's timeline since the last ``retried`` (which starts over).

    Which sweep wrote a ``lost`` event is read from its message: the reaper's
    reasons begin with "lease expired", fast recovery's with "worker"
    (``sql/reap_expired.sql``, ``sql/sweep_gone_workers.sql``).
    """
    ended = expired = 0
    for e in events:
        if e.kind == "retried":
            ended = expired = 0
        elif e.kind in DEATH_KINDS and e.from_status == "running":
            by_lease = e.kind == "reaped" or (
                e.kind == "lost" and (e.message or "").startswith("lease expired")
            )
            if by_lease:
                expired += 1
            else:
                ended += 1
    return Deaths(ended + expired, ended, expired)


def _times(n: int) -> str:
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def died_line(d: Deaths) -> str | None:
    """The value of ``show``'s ``died`` line, or None for a job no worker died running."""
    if not d.count:
        return None
    parts = []
    if d.session_ended:
        parts.append(f"database session ended {_times(d.session_ended)}: process killed or crashed")
    if d.lease_expired:
        parts.append(
            f"lease expired {_times(d.lease_expired)}: dead, hung or cut off from the database"
        )
    return (
        f"{_times(d.count)} while running ({'; '.join(parts)}); the exit signal or code "
        "is known only to what started the worker (systemd: journalctl -u UNIT)"
    )


def status_text(job: Job, now: datetime) -> str:
    """A job's status as ``show`` and ``status`` print it: a delayed job reads as scheduled.

    The stored status stays in the text (``queued``, ``waiting``), so what a
    person reads still matches ``--status`` filters and the JSON.
    """
    shown = job_display.shown_status(job, now)
    if shown == job_display.SCHEDULED:
        return f"scheduled, runs {job_display.runs_in(job.available_at, now)} (queued until then)"
    if shown == job_display.AWAITING_INPUT:
        return (
            f"awaiting input (waiting): queue-ctl workflows provide-input "
            f"{job.workflow_id} {job.node} VALUE"
        )
    return str(job.status)


def task_text(job: Job) -> str:
    """A job's task, or for a workflow input node what it is (``input approve of workflow 3``)."""
    if job_display.is_input(job.task):
        return f"input {job.node} of workflow {job.workflow_id}"
    return job.task


def job_lines(job: Job, *, died: Deaths | None = None, now: datetime | None = None) -> list[str]:
    """One job, one ``name: value`` line per field that has a value.

    ``died`` (``show`` passes it, from the job's events) adds a ``died`` line
    under the attempts, so a poison job's crash loop is the first thing seen.
    ``now`` (default: the clock) decides whether a queued job is still scheduled.
    """
    fields = [
        ("id", job.id),
        ("task", task_text(job)),
        ("queue", job.queue),
        ("status", status_text(job, now or datetime.now(UTC))),
        ("attempt", f"{job.attempt}/{job.max_attempts}"),
        ("died", None if died is None else died_line(died)),
        ("priority", job.priority),
        ("args", json.dumps(job.args)),
        ("available_at", job.available_at),
        ("created_at", job.created_at),
        ("started_at", job.started_at),
        ("finished_at", job.finished_at),
        ("duration_ms", job.duration_ms),
        ("claimed_by", job.claimed_by),
        ("lock_key", job.lock_key),
        ("affinity_key", job.affinity_key),
        ("idempotency_key", job.idempotency_key),
        ("dedupe_key", job.dedupe_key),
        ("cancel_requested", job.cancel_requested if job.cancel_requested else None),
        ("progress", None if job.progress is None else json.dumps(job.progress)),
        ("result", None if job.result is None else json.dumps(job.result)),
        ("error", job.error),
    ]
    return [f"{name:>16}: {value}" for name, value in fields if value is not None]


def job_list_lines(jobs: list[Job], now: datetime | None = None) -> list[str]:
    """The ``queue-ctl list`` table (fixed widths, so long names push columns right).

    A delayed job's status reads ``scheduled`` and its RUNS column says when
    (``in 4m05s``); an input node reads ``awaiting input`` with its workflow.
    """
    now = now or datetime.now(UTC)
    lines = [
        f"{'ID':>8}  {'STATUS':<14} {'QUEUE':<16} {'TASK':<24} {'ATTEMPT':>7}  "
        f"{'CREATED':<25}  RUNS"
    ]
    for j in jobs:
        shown = job_display.shown_status(j, now)
        runs = job_display.runs_in(j.available_at, now) if shown == job_display.SCHEDULED else ""
        lines.append(
            f"{j.id:>8}  {shown:<14} {j.queue:<16} {task_text(j):<24} "
            f"{j.attempt:>3}/{j.max_attempts:<3}  "
            f"{j.created_at.isoformat(timespec='seconds'):<25}  {runs}".rstrip()
        )
    return lines


def events_lines(events: list[stats.JobEvent]) -> list[str]:
    """A job's event timeline (``queue-ctl show``), oldest first."""
    header = ["AT", "EVENT", "FROM", "TO", "ATTEMPT", "WORKER", "MESSAGE"]
    body = [
        [
            e.at.isoformat(timespec="milliseconds"),
            e.kind,
            e.from_status or "-",
            e.to_status or "-",
            str(e.attempt) if e.attempt is not None else "-",
            e.worker_id or "-",
            e.message or "",
        ]
        for e in events
    ]
    return table(header, body, right={4})


# -- queues and workers ----------------------------------------------------------------


def _pair(a: float | None, b: float | None) -> str:
    return f"{stats.format_duration(a)}/{stats.format_duration(b)}"


def _per_min(n: int, window_s: float) -> str:
    value = stats.rate_per_s(n, window_s) * 60
    return f"{value:.0f}" if value >= 10 or value == 0 else f"{value:.1f}"


def compact_count(n: int) -> str:
    """An estimated count, rounded as it deserves: ``9876``, ``12k``, ``1.0M``."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return str(n)


def count_cell(q: stats.QueueStats, name: str) -> str:
    """A count of ``q``: exact as is, ``~1.0M`` when estimated, ``≥ 10,000`` when a lower bound."""
    n = int(getattr(q, name))
    kind = q.exactness(name)
    if kind == "estimate":
        return stats.MARKS[kind] + compact_count(n)
    if kind == "at_least":
        return stats.MARKS[kind] + f"{n:,}"
    return str(n)


def scale_cell(limit: int | None) -> str:
    """``-`` for no scale limit, else the limit."""
    return "-" if limit is None else str(limit)


def rate_cell(rate: float | None, burst: int | None) -> str:
    """``-`` for no rate limit, else ``R/s`` with ``xB`` when the burst is above 1."""
    if rate is None:
        return "-"
    return f"{rate:g}/s" + (f" x{burst}" if burst is not None and burst > 1 else "")


#: The line under a stats table with an estimated or lower-bound figure.
ESTIMATE_NOTE = (
    "~ estimate, \N{GREATER-THAN OR EQUAL TO} at least: a figure above "
    "QUEUE_ENGINE_STATS_EXACT_CAP jobs per read is not counted exactly"
)


def stats_lines(rows: list[stats.QueueStats]) -> list[str]:
    """The ``queue-ctl stats`` table."""
    lines = table(*stats_cells(rows))
    if any(q.estimated or q.at_least for q in rows):
        lines.append(ESTIMATE_NOTE)
    return lines


def stats_cells(rows: list[stats.QueueStats]) -> tuple[Row, list[Row], set[int]]:
    """The ``stats`` table as cells: header, a row per queue, the right-aligned columns."""
    header = [
        "QUEUE",
        "QUEUED",
        "DELAYED",
        "RUNNING",
        "OK/1h",
        "FAILED/1h",
        "LOST/1h",
        "IN/min 1m|15m",
        "OUT/min 1m|15m",
        "WAIT p50/p95",
        "RUN p50/p95",
        "OLDEST",
        "WORKERS live/parked/dead",
        "REPLICAS",
        "SCALE",
        "RATE",
        "PAUSED",
    ]
    body = [
        [
            q.queue,
            count_cell(q, "queued"),
            count_cell(q, "delayed"),
            str(q.running),
            count_cell(q, "succeeded_1h"),
            count_cell(q, "failed_1h"),
            count_cell(q, "lost_1h"),
            q.mark("in_1m", "in_15m") + f"{_per_min(q.in_1m, 60)}|{_per_min(q.in_15m, 900)}",
            q.mark("out_1m", "out_15m") + f"{_per_min(q.out_1m, 60)}|{_per_min(q.out_15m, 900)}",
            q.mark("wait_p50_s", "wait_p95_s") + _pair(q.wait_p50_s, q.wait_p95_s),
            q.mark("run_p50_s", "run_p95_s") + _pair(q.run_p50_s, q.run_p95_s),
            q.mark("oldest_queued_s") + stats.format_duration(q.oldest_queued_s),
            f"{q.workers_live}/{q.workers_parked}/{q.workers_dead}",
            str(q.replicas_suggested),
            scale_cell(q.scale_limit),
            rate_cell(q.rate_limit, q.rate_burst),
            "yes" if q.paused else "no",
        ]
        for q in rows
    ]
    return header, body, set(range(1, 16))


def stats_document(rows: list[stats.QueueStats], exact_cap: int) -> dict[str, Any]:
    """``queue-ctl stats --json``: the figures with the definition of each, and the cap used."""
    return {
        "generated_at": datetime.now(UTC).isoformat(),
        "definitions": {
            "queued": "status queued and available now",
            "delayed": "status queued, available later",
            "wait": "started_at - available_at of jobs started in the last 15 min",
            "run": "duration of jobs succeeded or failed in the last 15 min",
            "in/out": "jobs created / finished (any final status) in the window",
            "replicas": stats.REPLICAS_FORMULA,
            "paused": "queue-ctl pause: its workers claim nothing until queue-ctl resume",
            "scale_limit": "queue-ctl scale: at most this many workers claim (null: no limit)",
            "rate_limit": "queue-ctl rate: at most this many jobs start per second, "
            "in bursts of rate_burst (null: no limit)",
            "workers_parked": "live workers in state parked (a park, or no scale slot), "
            "also counted in workers_live",
            "estimated": "figures of the queue that are estimates: a count that stopped at "
            "exact_cap (backlog: the planner's estimate from the table's statistics; "
            "windows: extrapolated from the newest exact_cap finished jobs; percentiles: "
            "of those jobs)",
            "at_least": "figures of the queue that are lower bounds (counted up to exact_cap)",
        },
        "exact_cap": exact_cap,
        "queues": [q.to_dict() for q in rows],
    }


def workers_lines(rows: list[stats.WorkerRow]) -> list[str]:
    """The ``queue-ctl workers`` table."""
    return table(*workers_cells(rows))


def workers_cells(rows: list[stats.WorkerRow]) -> tuple[Row, list[Row], set[int]]:
    """The ``workers`` table as cells: header, a row per process, the right-aligned columns."""
    header = [
        "ID",
        "ROLE",
        "HOST",
        "PID",
        "QUEUE",
        "STATE",
        "WARM",
        "JOB",
        "BEAT AGO",
        "RSS",
        "CPU%",
        "LOAD",
        "HOST CPU%",
        "HOST MEM",
        "LIVENESS",
    ]
    body = [
        [
            w.id,
            w.role,
            w.host,
            str(w.pid),
            w.queue or "-",
            w.state,
            w.warm_key or "-",
            str(w.current_job_id) if w.current_job_id is not None else "-",
            stats.format_duration(w.heartbeat_age_s),
            stats.format_bytes(w.rss_bytes),
            f"{w.cpu_percent:.1f}" if w.cpu_percent is not None else "-",
            f"{w.load_1m:.2f}" if w.load_1m is not None else "-",
            f"{w.host_cpu_pct:.0f}" if w.host_cpu_pct is not None else "-",
            host_memory_cell(w.host_memory),
            w.liveness
            + (" (flagged)" if w.flagged_dead_at is not None else "")
            + (
                (" (stop now requested)" if w.stop_now else " (stop requested)")
                if w.stop_requested
                else ""
            ),
        ]
        for w in rows
    ]
    return header, body, {3, 7, 8, 9, 10, 11, 12, 13}


def host_memory_cell(memory: tuple[int, int] | None) -> str:
    """The host's memory ``used/total`` in GiB, e.g. ``5.1/15.6G``; ``-`` when unknown."""
    if memory is None:
        return "-"
    used, total = memory
    return f"{used / 2**30:.1f}/{total / 2**30:.1f}G"


def controls_lines(view: Controls) -> list[str]:
    """The ``queue-ctl controls`` tables: queue controls, parks, pending stop requests."""
    lines = ["QUEUE CONTROLS"]
    if view.queues:
        lines += table(
            ["QUEUE", "PAUSED", "SINCE", "SCALE", "RATE", "UPDATED"],
            [
                [
                    q.queue,
                    "yes" if q.paused else "no",
                    q.paused_at.isoformat(timespec="seconds") if q.paused_at else "-",
                    scale_cell(q.scale_limit),
                    rate_cell(q.rate_limit, q.rate_burst),
                    q.updated_at.isoformat(timespec="seconds"),
                ]
                for q in view.queues
            ],
            right={3},
        )
    else:
        lines.append("(no queue is paused, scaled or rate limited)")
    lines += ["", "PARKS"]
    if view.parks:
        lines += table(
            ["TARGET", "QUEUE", "SINCE", "LIVE WORKERS"],
            [
                [
                    f"worker {p.worker_id}" if p.kind == "worker" else f"host {p.host}",
                    p.queue or ("(all)" if p.kind == "host" else "-"),
                    p.parked_at.isoformat(timespec="seconds"),
                    str(p.live_workers),
                ]
                for p in view.parks
            ],
            right={3},
        )
    else:
        lines.append("(no parks)")
    lines += ["", "STOP REQUESTS"]
    if view.stops:
        lines += table(
            ["WORKER", "HOST", "QUEUE", "STATE", "HOW", "SINCE"],
            [
                [
                    s.worker_id,
                    s.host,
                    s.queue or "-",
                    s.state,
                    "now" if s.stop_now else "after job",
                    s.stop_requested_at.isoformat(timespec="seconds"),
                ]
                for s in view.stops
            ],
        )
    else:
        lines.append("(no pending stop requests)")
    return lines


# -- schedules and retention ----------------------------------------------------------


def when(value: datetime | None, zone: tzinfo) -> str:
    """A time in the schedule's zone, to the second; ``-`` for none."""
    return "-" if value is None else value.astimezone(zone).isoformat(timespec="seconds")


def schedule_lines(rows: list[ScheduleRow], now: datetime) -> list[str]:
    """The ``queue-ctl schedules list`` table, times in each schedule's own zone."""
    lines = [
        f"{'NAME':<24} {'EXPRESSION':<18} {'TZ':<16} {'TASK':<20} {'QUEUE':<12} "
        f"{'ENABLED':<7} {'SOURCE':<6} {'LAST SLOT':<25} NEXT FIRE"
    ]
    for row in rows:
        spec = row.spec
        zone = spec.trigger.zone
        lines.append(
            f"{spec.name:<24} {spec.expression:<18} {spec.tz:<16} {spec.task:<20} "
            f"{spec.queue:<12} {'yes' if spec.enabled else 'no':<7} {spec.source:<6} "
            f"{when(row.last_slot, zone):<25} {when(row.next_fire(now), zone)}"
        )
    return lines


def prune_summary(result: PruneResult) -> str:
    """``queue-ctl prune``: what was (or would be) deleted, in one line."""
    verb = "would delete" if result.dry_run else "deleted"
    by_status = ", ".join(f"{k} {v}" for k, v in sorted(result.jobs.items())) or "none"
    text = (
        f"{verb} {result.jobs_total} jobs ({by_status}), {result.events} events, "
        f"{result.workers} worker rows"
    )
    if result.workflows_total or result.workflow_jobs:
        by_state = ", ".join(f"{k} {v}" for k, v in sorted(result.workflows.items()))
        text += (
            f", {result.workflows_total} finished workflows ({by_state}) with "
            f"{result.workflow_jobs} jobs"
        )
    if result.control_events:
        text += f", {result.control_events} audit rows of controls"
    if not result.dry_run:
        text += f" in {result.batches} batches"
        if result.more:
            text += "; more left (--max-batches reached): run again"
    return text
