"""``queue-ctl pause`` and ``resume``: stop and restart claiming from one queue.

The state lives in the database (:mod:`queue_engine.controls`), so it holds
for every worker of the queue on every host, including workers started later,
until it is changed again. Errors are one line with the exit codes of
:mod:`queue_engine.cli.common` (2 for a bad queue name, 3 for a schema older
than version 3, 69 when the database is unreachable).
"""

from __future__ import annotations

import click

from queue_engine.controls import pause_queue, resume_queue
from queue_engine.db import connect
from queue_engine.validation import check_queue_name


@click.command(name="pause")
@click.argument("queue")
@click.pass_context
def pause_cmd(ctx: click.Context, queue: str) -> None:
    """Stop workers claiming from QUEUE; running jobs finish, new jobs wait."""
    check_queue_name(queue)  # before connecting: a typo fails the same way with any DSN
    settings = ctx.find_root().obj
    with connect(settings["dsn"]) as conn:
        result = pause_queue(conn, settings["schema"], queue)
    since = result.paused_at.isoformat(timespec="seconds")
    if result.was_paused:
        click.echo(f"queue {queue} was already paused (since {since})")
    else:
        click.echo(f"queue {queue} paused: workers claim nothing from it until `resume`")


@click.command(name="resume")
@click.argument("queue")
@click.pass_context
def resume_cmd(ctx: click.Context, queue: str) -> None:
    """Let workers claim from QUEUE again; its idle workers are woken at once."""
    check_queue_name(queue)  # before connecting: a typo fails the same way with any DSN
    settings = ctx.find_root().obj
    with connect(settings["dsn"]) as conn:
        result = resume_queue(conn, settings["schema"], queue)
    if result.was_paused:
        click.echo(f"queue {queue} resumed")
    else:
        click.echo(f"queue {queue} was not paused (its workers were woken anyway)")
