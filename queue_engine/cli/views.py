"""``queue-ctl stats``, ``workers``, ``show`` and ``top``: what the fleet is doing.

The figures come from :mod:`queue_engine.operator.stats` (one statement per view), so
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

from queue_engine.cli import render
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.flow_render import flow_lines
from queue_engine.cli.render import print_json
from queue_engine.cli.top import TOP_FLOW_ROWS, top_frame
from queue_engine.operator import flow, stats
from queue_engine.producer.client import Client

#: ``top``'s width when there is no terminal to ask: wide enough for every column.
UNSIZED_WIDTH = 200


@click.command(name="stats")
@click.option("--queue", "-q", help="Only this queue (and only its partitions).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@pass_cli
def stats_cmd(cli: CliContext, queue: str | None, as_json: bool) -> None:
    """Per-queue depth, throughput, wait/run times, workers and a replicas suggestion.

    Under the queues: the busiest concurrency keys (running, limit, jobs
    waiting on the limit) and the deepest partitions, ten of each.
    """
    cap = stats.exact_cap()
    with cli.connect() as conn:
        rows = stats.queue_stats(conn, cli.schema, queue=queue, cap=cap)
        keys = flow.key_flows(conn, cli.schema, cap=cap)
        parts = flow.partitions_of(conn, cli.schema, [q.queue for q in rows], cap=cap)
    if as_json:
        print_json(
            {
                **render.stats_document(rows, cap),
                "concurrency_keys": [k.to_dict() for k in keys],
                "partitions": [p.to_dict() for p in parts],
            }
        )
        return
    click.echo("\n".join(render.stats_lines(rows)))
    if not rows:
        click.echo("(no queues with jobs or workers)")
    lines = flow_lines(keys, parts)
    if lines:
        click.echo("\n".join(lines))


@click.command(name="workers")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as a JSON array.")
@pass_cli
def workers_cmd(cli: CliContext, as_json: bool) -> None:
    """Every worker, orchestrator and scheduler process, with heartbeat age, RSS, CPU and load."""
    with cli.connect() as conn:
        rows = stats.workers(conn, cli.schema)
    if as_json:
        print_json([w.to_dict() for w in rows])
        return
    click.echo("\n".join(render.workers_lines(rows)))


@click.command(name="show")
@click.argument("job_id", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the job and its events as JSON.")
@pass_cli
def show_cmd(cli: CliContext, job_id: int, as_json: bool) -> None:
    """One job with its event timeline (every transition, oldest first) and its worker deaths."""
    with cli.connect() as conn:
        job = Client(conn=conn, schema=cli.schema).get(job_id)
        events = stats.job_events(conn, cli.schema, job_id)
    died = render.deaths(events)
    if as_json:
        print_json(
            {**job.to_dict(), "deaths": died.to_dict(), "events": [e.to_dict() for e in events]}
        )
        return
    click.echo("\n".join(render.job_lines(job, died=died)))
    click.echo("")
    click.echo("\n".join(render.events_lines(events)))


def snapshot(conn: Any, schema: str, *, width: int) -> str:
    """One frame of ``top``, fresh from the database, ``width`` columns wide."""
    queues = stats.queue_stats(conn, schema)
    return top_frame(
        queues,
        stats.workers(conn, schema),
        schema,
        datetime.now(UTC),
        width=width,
        keys=flow.key_flows(conn, schema, limit=TOP_FLOW_ROWS),
        partitions=flow.partitions_of(conn, schema, [q.queue for q in queues], limit=TOP_FLOW_ROWS),
    )


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


def _width() -> int:
    """The terminal's width (``COLUMNS`` first); 200 when there is none, e.g. output to a pipe.

    A terminal that reports no size (0 columns) counts as none.
    """
    return shutil.get_terminal_size((UNSIZED_WIDTH, 50)).columns or UNSIZED_WIDTH


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
@pass_cli
def top_cmd(cli: CliContext, interval: float, iterations: int | None) -> None:
    """Live view of queues and workers, refreshed every second (q or Ctrl-C to quit)."""
    schema = cli.schema
    with cli.connect() as conn:
        if not sys.stdout.isatty():
            for i in range(iterations or 1):
                if i:
                    time.sleep(interval)
                    click.echo("")
                click.echo(snapshot(conn, schema, width=_width()))
            return
        interactive_input = sys.stdin.isatty()
        frames = 0
        with _terminal(interactive_input), contextlib.suppress(KeyboardInterrupt):
            while iterations is None or frames < iterations:
                frame = snapshot(conn, schema, width=_width())
                sys.stdout.write("\x1b[H\x1b[2J" + frame + "\n")
                sys.stdout.flush()
                frames += 1
                if iterations is not None and frames >= iterations:
                    break
                if _wait_for_quit(interval, interactive_input):
                    break
