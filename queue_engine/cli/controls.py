"""``queue-ctl pause``, ``resume``, ``scale``, ``rate``, ``park``, ``unpark``, ``stop``, ``controls``.

The state lives in the database (:mod:`queue_engine.operator.controls`), so it holds
for every worker of the queue on every host, including workers started later,
until it is changed again. Errors are one line with the exit codes of
:mod:`queue_engine.cli.common` (2 for a bad queue name, 3 for a schema older
than version 3, 69 when the database is unreachable). The fleet controls
(scale, rate, park, unpark, stop) need schema version 4, give 2 for a bad
number, rate or target, and 1 when a park or stop names no live worker. Every
input is checked before connecting, so a typo fails the same way with any DSN.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from queue_engine.cli import render
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json
from queue_engine.foundation.errors import ValidationError
from queue_engine.operator.controls import (
    OFF,
    FleetTarget,
    check_burst,
    park,
    parse_rate,
    parse_scale,
    pause_queue,
    rate_queue,
    resume_queue,
    scale_queue,
    stop_workers,
    unpark,
)
from queue_engine.operator.controls import controls as read_controls
from queue_engine.producer.validation import check_queue_name


@click.command(name="pause")
@click.argument("queue")
@pass_cli
def pause_cmd(cli: CliContext, queue: str) -> None:
    """Stop workers claiming from QUEUE; running jobs finish, new jobs wait."""
    check_queue_name(queue)  # before connecting: a typo fails the same way with any DSN
    with cli.connect() as conn:
        result = pause_queue(conn, cli.schema, queue, by=cli.actor)
    since = result.paused_at.isoformat(timespec="seconds")
    if result.was_paused:
        click.echo(f"queue {queue} was already paused (since {since})")
    else:
        click.echo(f"queue {queue} paused: workers claim nothing from it until `resume`")


@click.command(name="resume")
@click.argument("queue")
@pass_cli
def resume_cmd(cli: CliContext, queue: str) -> None:
    """Let workers claim from QUEUE again; its idle workers are woken at once."""
    check_queue_name(queue)  # before connecting: a typo fails the same way with any DSN
    with cli.connect() as conn:
        result = resume_queue(conn, cli.schema, queue, by=cli.actor)
    if result.was_paused:
        click.echo(f"queue {queue} resumed")
    else:
        click.echo(f"queue {queue} was not paused (its workers were woken anyway)")


# -- fleet controls ------------------------------------------------------------------

#: ``scale q -1`` and ``rate q -5`` must reach the validation (one clear line)
#: instead of failing as "no such option: -1".
_NEGATIVE_OK = {"ignore_unknown_options": True}


def _limit(limit: int | None) -> str:
    return "no limit" if limit is None else f"{limit} worker{'s' if limit != 1 else ''}"


def _rate(rate: float | None, burst: int | None) -> str:
    if rate is None:
        return "no limit"
    return f"{rate:g} jobs/s, burst {burst}"


def _since(at: datetime | None) -> str:
    return "-" if at is None else at.isoformat(timespec="seconds")


def _workers(ids: list[str]) -> str:
    count = f"{len(ids)} live worker{'s' if len(ids) != 1 else ''}"
    return count + (f" ({', '.join(ids)})" if ids else "")


def _target(host: str | None, queue: str | None, worker_id: str | None) -> FleetTarget:
    # Before connecting, like pause: a bad target fails the same way with any DSN.
    return FleetTarget(host=host, queue=queue, worker_id=worker_id)


def _target_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--host``, ``--queue`` and ``--worker``: the same target syntax for park, unpark, stop."""
    func = click.option(
        "--worker",
        "worker_id",
        metavar="ID",
        help="One worker process (its id in `queue-ctl workers`).",
    )(func)
    func = click.option(
        "--queue", "-q", metavar="QUEUE", help="With --host: only the workers of this queue."
    )(func)
    return click.option(
        "--host",
        metavar="HOST",
        help="Every worker on this host (as `queue-ctl workers` shows it).",
    )(func)


@click.command(name="scale", context_settings=_NEGATIVE_OK)
@click.argument("queue")
@click.argument("limit", metavar="N|off")
@pass_cli
def scale_cmd(cli: CliContext, queue: str, limit: str) -> None:
    """Let at most N workers of QUEUE claim, cluster-wide (0: none; `off`: no limit).

    Workers beyond the limit stay alive and parked, and take over a slot when
    one frees up, so `scale` is instant in both directions: no process starts.
    """
    check_queue_name(queue)
    value = parse_scale(limit)
    with cli.connect() as conn:
        result = scale_queue(conn, cli.schema, queue, value, by=cli.actor)
    was = f"was: {_limit(result.previous)}"
    woken = "; its idle workers were woken" if result.woken else ""
    if not result.changed:
        what = "no scale limit" if value is None else f"scale limit {_limit(value)}"
        click.echo(f"queue {queue} already had {what} (unchanged{woken})")
    elif value is None:
        click.echo(f"queue {queue} scale limit removed ({was}){woken}")
    elif value == 0:
        click.echo(
            f"queue {queue} scaled to 0 workers ({was}): its workers stay alive and claim "
            "nothing until it is scaled up"
        )
    else:
        click.echo(f"queue {queue} scaled to {_limit(value)} ({was}){woken}")


@click.command(name="rate", context_settings=_NEGATIVE_OK)
@click.argument("queue")
@click.argument("rate", metavar="R|off")
@click.option(
    "--burst",
    type=int,
    metavar="B",
    help="Jobs that may start at once after a quiet spell (1-100000, default 1).",
)
@pass_cli
def rate_cmd(cli: CliContext, queue: str, rate: str, burst: int | None) -> None:
    """Start at most R jobs per second of QUEUE, cluster-wide (`off`: no limit).

    R may be fractional (0.5: one job every 2 s). A new rate or burst starts
    with a full bucket; the same rate and burst again leave the bucket alone.
    """
    check_queue_name(queue)
    value = parse_rate(rate)
    if value is None and burst is not None:
        raise ValidationError(f"--burst goes with a rate, not with `{OFF}`")
    if burst is not None:
        check_burst(burst)
    with cli.connect() as conn:
        result = rate_queue(conn, cli.schema, queue, value, burst=burst, by=cli.actor)
    was = _rate(result.previous_rate, result.previous_burst)
    if not result.changed and value is None:
        click.echo(f"queue {queue} already had no rate limit (unchanged)")
    elif not result.changed:
        click.echo(
            f"queue {queue} already had rate limit {_rate(result.rate, result.burst)} "
            "(unchanged, bucket kept)"
        )
    elif value is None:
        click.echo(f"queue {queue} rate limit removed (was: {was})")
    else:
        click.echo(
            f"queue {queue} rate limited to {_rate(result.rate, result.burst)} "
            f"(was: {was}); the bucket starts full"
        )


@click.command(name="park")
@_target_options
@pass_cli
def park_cmd(cli: CliContext, host: str | None, queue: str | None, worker_id: str | None) -> None:
    """Keep workers alive but claiming nothing: a host's (now and later) or one worker.

    Exactly one of --host HOST [--queue QUEUE] or --worker ID. A host park also
    holds for workers started on that host later, until `unpark`.
    """
    target = _target(host, queue, worker_id)
    with cli.connect() as conn:
        result = park(conn, cli.schema, target, by=cli.actor)
    since = _since(result.parked_at)
    if target.worker_id is not None:
        where = f"host {result.host}, queue {result.queue or '-'}"
        if result.created:
            click.echo(
                f"parked worker {target.worker_id} ({where}): it stays alive and claims nothing "
                f"until `queue-ctl unpark --worker {target.worker_id}`"
            )
        else:
            click.echo(f"worker {target.worker_id} was already parked (since {since})")
        return
    matches = _workers(result.worker_ids)
    if result.created:
        click.echo(
            f"parked {target.describe()}: matches {matches} now; it also holds for workers "
            f"started on {target.host} later, until `queue-ctl unpark --host {target.host}"
            + (f" --queue {target.queue}`" if target.queue else "`")
        )
    else:
        click.echo(f"{target.describe()} was already parked (since {since}); matches {matches} now")
    if result.covered_by_host_park:
        click.echo(f"note: host {target.host} is also parked for all queues")


@click.command(name="unpark")
@_target_options
@pass_cli
def unpark_cmd(cli: CliContext, host: str | None, queue: str | None, worker_id: str | None) -> None:
    """Remove parks: every park of a host, its park of one queue, or one worker's park.

    Exactly one of --host HOST [--queue QUEUE] or --worker ID. Reports any other
    park that still holds for the same workers.
    """
    target = _target(host, queue, worker_id)
    with cli.connect() as conn:
        result = unpark(conn, cli.schema, target, by=cli.actor)
    if target.worker_id is not None:
        wid = target.worker_id
        click.echo(f"unparked worker {wid}" if result.removed else f"worker {wid} was not parked")
        if result.host_parks:
            which = ", ".join("all queues" if q == "*" else f"queue {q}" for q in result.host_parks)
            click.echo(
                f"note: worker {wid} stays parked by the park of host {result.host} ({which}): "
                f"`queue-ctl unpark --host {result.host}` removes it"
            )
        return
    if result.removed:
        parts = ", ".join("all queues" if q is None else f"queue {q}" for q in result.removed)
        click.echo(f"unparked host {target.host}: removed {len(result.removed)} park(s) ({parts})")
    else:
        click.echo(f"{target.describe()} was not parked")
    if result.host_parked_at is not None:
        click.echo(
            f"note: host {target.host} is still parked for all queues "
            f"(since {_since(result.host_parked_at)}): the workers of {target.queue} on "
            f"{target.host} stay parked until `queue-ctl unpark --host {target.host}`"
        )
    if result.parked_worker_ids:
        click.echo(
            f"note: {_workers(result.parked_worker_ids)} on {target.host} stay parked by id "
            "(`queue-ctl unpark --worker ID`)"
        )


@click.command(name="stop")
@_target_options
@click.option(
    "--now",
    "now",
    is_flag=True,
    help="Give the running job back to the queue at once (attempt not counted) "
    "instead of letting it finish.",
)
@pass_cli
def stop_cmd(
    cli: CliContext, host: str | None, queue: str | None, worker_id: str | None, now: bool
) -> None:
    """Ask live workers to exit 0 after their current job (prefetched jobs go back).

    Exactly one of --host HOST [--queue QUEUE] or --worker ID. With --now a
    busy worker does not wait for its job: at its next heartbeat it gives the
    job back to the queue (attempt not counted; another worker runs it again
    from the start) and exits 0. One-shot: workers started later are not
    affected (use `park` for that). The shipped worker unit (Restart=on-failure)
    leaves them stopped; a supervisor that restarts on any exit starts them
    again: park them to keep them down.
    """
    target = _target(host, queue, worker_id)
    with cli.connect() as conn:
        requests = stop_workers(conn, cli.schema, target, now=now, by=cli.actor)
    new = [r.worker_id for r in requests if not r.already]
    old = [r for r in requests if r.already]
    if new:
        how = (
            "each gives its running job back at once and exits 0"
            if now
            else "each finishes its current job and exits 0"
        )
        click.echo(
            f"{'hard ' if now else ''}stop requested for {len(new)} "
            f"worker{'s' if len(new) != 1 else ''}: {', '.join(new)} ({how})"
        )
    for r in old:
        click.echo(
            f"worker {r.worker_id} was already asked to stop{' at once' if r.now else ''} "
            f"(since {_since(r.stop_requested_at)})"
        )


@click.command(name="controls")
@click.option("--json", "as_json", is_flag=True, help="Print the controls as JSON.")
@pass_cli
def controls_cmd(cli: CliContext, as_json: bool) -> None:
    """Every control in force: paused, scaled and rate-limited queues, parks, stop requests."""
    with cli.connect() as conn:
        view = read_controls(conn, cli.schema)
    if as_json:
        print_json(view.to_dict())
        return
    click.echo("\n".join(render.controls_lines(view)))
