"""``queue-ctl stats``, ``workers``, ``show``, ``top`` and ``controls``: what the fleet is doing.

The figures come from :mod:`queue_engine.stats` (one statement per view), so
the tables, ``--json`` and the metrics endpoint always agree. ``top`` redraws
the stats and workers tables every second on a terminal and restores it on
``q`` or Ctrl-C; when stdout is not a terminal it prints one snapshot and exits,
so it can be piped, logged and tested.
"""

from __future__ import annotations

import contextlib
import select
import shutil
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import click

from queue_engine import stats
from queue_engine.cli.common import print_json
from queue_engine.client import Client
from queue_engine.controls import Controls
from queue_engine.db import connect

Row = list[str]


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


def _pair(a: float | None, b: float | None) -> str:
    return f"{stats.format_duration(a)}/{stats.format_duration(b)}"


def _per_min(n: int, window_s: float) -> str:
    value = stats.rate_per_s(n, window_s) * 60
    return f"{value:.0f}" if value >= 10 or value == 0 else f"{value:.1f}"


def scale_cell(limit: int | None) -> str:
    """``-`` for no scale limit, else the limit."""
    return "-" if limit is None else str(limit)


def rate_cell(rate: float | None, burst: int | None) -> str:
    """``-`` for no rate limit, else ``R/s`` with ``xB`` when the burst is above 1."""
    if rate is None:
        return "-"
    return f"{rate:g}/s" + (f" x{burst}" if burst is not None and burst > 1 else "")


def stats_lines(rows: list[stats.QueueStats]) -> list[str]:
    """The ``queue-ctl stats`` table."""
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
            str(q.queued),
            str(q.delayed),
            str(q.running),
            str(q.succeeded_1h),
            str(q.failed_1h),
            str(q.lost_1h),
            f"{_per_min(q.in_1m, 60)}|{_per_min(q.in_15m, 900)}",
            f"{_per_min(q.out_1m, 60)}|{_per_min(q.out_15m, 900)}",
            _pair(q.wait_p50_s, q.wait_p95_s),
            _pair(q.run_p50_s, q.run_p95_s),
            stats.format_duration(q.oldest_queued_s),
            f"{q.workers_live}/{q.workers_parked}/{q.workers_dead}",
            str(q.replicas_suggested),
            scale_cell(q.scale_limit),
            rate_cell(q.rate_limit, q.rate_burst),
            "yes" if q.paused else "no",
        ]
        for q in rows
    ]
    return table(header, body, right=set(range(1, 16)))


def workers_lines(rows: list[stats.WorkerRow]) -> list[str]:
    """The ``queue-ctl workers`` table."""
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
            w.liveness
            + (" (flagged)" if w.flagged_dead_at is not None else "")
            + (" (stop requested)" if w.stop_requested else ""),
        ]
        for w in rows
    ]
    return table(header, body, right={3, 7, 8, 9, 10, 11})


def _stats_payload(rows: list[stats.QueueStats]) -> dict[str, Any]:
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
        },
        "queues": [q.to_dict() for q in rows],
    }


@click.command(name="stats")
@click.option("--queue", "-q", help="Only this queue.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.pass_context
def stats_cmd(ctx: click.Context, queue: str | None, as_json: bool) -> None:
    """Per-queue depth, throughput, wait/run times, workers and a replicas suggestion."""
    with connect(ctx.obj["dsn"]) as conn:
        rows = stats.queue_stats(conn, ctx.obj["schema"], queue=queue)
    if as_json:
        print_json(_stats_payload(rows))
        return
    click.echo("\n".join(stats_lines(rows)))
    if not rows:
        click.echo("(no queues with jobs or workers)")


@click.command(name="workers")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON array.")
@click.pass_context
def workers_cmd(ctx: click.Context, as_json: bool) -> None:
    """Every worker, orchestrator and scheduler process, with heartbeat age, RSS, CPU and load."""
    with connect(ctx.obj["dsn"]) as conn:
        rows = stats.workers(conn, ctx.obj["schema"])
    if as_json:
        print_json([w.to_dict() for w in rows])
        return
    click.echo("\n".join(workers_lines(rows)))


@click.command(name="show")
@click.argument("job_id", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the job and its events as JSON.")
@click.pass_context
def show_cmd(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """One job with its event timeline (every transition, oldest first)."""
    from queue_engine.cli.ctl import _job_lines

    with connect(ctx.obj["dsn"]) as conn:
        job = Client(conn=conn, schema=ctx.obj["schema"]).get(job_id)
        events = stats.job_events(conn, ctx.obj["schema"], job_id)
    if as_json:
        print_json({**job.to_dict(), "events": [e.to_dict() for e in events]})
        return
    click.echo("\n".join(_job_lines(job)))
    click.echo("")
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
    click.echo("\n".join(table(header, body, right={4})))


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
            ["WORKER", "HOST", "QUEUE", "STATE", "SINCE"],
            [
                [
                    s.worker_id,
                    s.host,
                    s.queue or "-",
                    s.state,
                    s.stop_requested_at.isoformat(timespec="seconds"),
                ]
                for s in view.stops
            ],
        )
    else:
        lines.append("(no pending stop requests)")
    return lines


def snapshot(conn: Any, schema: str, *, width: int = 200) -> str:
    """One frame of ``top``: a title line, the stats table and the workers table."""
    queues = stats.queue_stats(conn, schema)
    workers = stats.workers(conn, schema)
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = [
        f"queue-engine top  {now}  schema={schema}  (q or Ctrl-C to quit)",
        "",
        *stats_lines(queues),
        "",
        *workers_lines(workers),
    ]
    return "\n".join(line[:width] for line in lines)


@contextlib.contextmanager
def _terminal(interactive_input: bool) -> Iterator[None]:
    """Alternate screen, hidden cursor, cbreak input; always restored on the way out."""
    saved = None
    if interactive_input:
        import termios
        import tty

        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        tty.setcbreak(fd)
    sys.stdout.write("\x1b[?1049h\x1b[?25l")
    sys.stdout.flush()
    try:
        yield
    finally:
        sys.stdout.write("\x1b[?25h\x1b[?1049l")
        sys.stdout.flush()
        if saved is not None:
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


def _wait_for_quit(seconds: float, interactive_input: bool) -> bool:
    """Wait up to ``seconds``; True when the user pressed q."""
    if not interactive_input:
        time.sleep(seconds)
        return False
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([sys.stdin], [], [], left)
        if ready and sys.stdin.read(1) in ("q", "Q"):
            return True
    return False


@click.command(name="top")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@click.option(
    "--iterations",
    type=click.IntRange(min=1),
    help="Frames to draw before exiting (default: until q/Ctrl-C on a terminal, 1 otherwise).",
)
@click.pass_context
def top_cmd(ctx: click.Context, interval: float, iterations: int | None) -> None:
    """Live view of queues and workers, refreshed every second (q or Ctrl-C to quit)."""
    schema = ctx.obj["schema"]
    with connect(ctx.obj["dsn"]) as conn:
        if not sys.stdout.isatty():
            for i in range(iterations or 1):
                if i:
                    time.sleep(interval)
                    click.echo("")
                click.echo(snapshot(conn, schema))
            return
        interactive_input = sys.stdin.isatty()
        frames = 0
        with _terminal(interactive_input), contextlib.suppress(KeyboardInterrupt):
            while iterations is None or frames < iterations:
                # A terminal that reports no size (0 columns) gets untruncated lines.
                width = shutil.get_terminal_size((200, 50)).columns or 200
                frame = snapshot(conn, schema, width=width)
                sys.stdout.write("\x1b[H\x1b[2J" + frame + "\n")
                sys.stdout.flush()
                frames += 1
                if iterations is not None and frames >= iterations:
                    break
                if _wait_for_quit(interval, interactive_input):
                    break
