"""``queue-ctl partitions``: fair-share weights of partitions, and a queue's partitions.

Jobs with a ``partition_key`` take turns across partitions within a queue and
priority level (:mod:`queue_engine.operator.partitions`, migration 0032). A
weight applies to the jobs enqueued after it is set: each job's turn is given
when it is enqueued, so jobs already queued keep theirs. Errors are one line
with the exit codes of :mod:`queue_engine.cli.common` (2 for a bad queue, key
or weight, checked before connecting; 3 for a schema older than version 32).
"""

from __future__ import annotations

import click

from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.render import print_json, table
from queue_engine.foundation.errors import ValidationError
from queue_engine.operator.partitions import (
    DEPTH_CAP,
    SCAN_MAX,
    check_list_args,
    check_partition,
    clear_weight,
    list_partitions,
    parse_weight,
    set_weight,
)


@click.group(name="partitions")
def partitions() -> None:
    """Fair share across partitions (tenants): weights, and each partition's backlog."""


def _weight(value: float | None) -> str:
    return "1 (default)" if value is None else f"{value:g}"


#: ``weight q k -1`` must reach the validation (one clear line) instead of
#: failing as "no such option: -1", as ``limits set`` and ``rate``.
@partitions.command(name="weight", context_settings={"ignore_unknown_options": True})
@click.argument("queue")
@click.argument("key")
@click.argument("w", metavar="W", required=False)
@click.option("--clear", is_flag=True, help="Remove the weight: back to 1.")
@pass_cli
def weight_cmd(cli: CliContext, queue: str, key: str, w: str | None, clear: bool) -> None:
    """Give partition KEY of QUEUE weight W (default 1): W turns for one of weight 1.

    Applies to KEY's jobs enqueued from now on; its queued jobs keep their turns.
    """
    check_partition(queue, key)  # before connecting: a typo fails the same way with any DSN
    if clear == (w is not None):
        raise ValidationError("give a weight W, or --clear (not both)")
    if w is None:
        with cli.connect() as conn:
            removed = clear_weight(conn, cli.schema, queue, key, by=cli.actor)
        if removed is None:
            click.echo(f"partition {key} of queue {queue} had no weight set (unchanged: 1)")
        else:
            click.echo(
                f"partition {key} of queue {queue}: weight {removed:g} removed (now 1); "
                "applies to jobs enqueued from now on"
            )
        return
    parse_weight(w)
    with cli.connect() as conn:
        result = set_weight(conn, cli.schema, queue, key, w, by=cli.actor)
    queued = f"{result.queued}+" if result.queued >= DEPTH_CAP else str(result.queued)
    click.echo(
        f"partition {key} of queue {queue}: weight {result.weight:g} "
        f"(was: {_weight(result.previous)}); applies to jobs enqueued from now on, "
        f"its {queued} queued jobs keep their turns"
    )


@partitions.command(name="list")
@click.argument("queue")
@click.option("--limit", type=int, default=20, show_default=True, help="Partitions shown.")
@click.option("--json", "as_json", is_flag=True, help="Print the partitions as JSON.")
@pass_cli
def list_cmd(cli: CliContext, queue: str, limit: int, as_json: bool) -> None:
    """QUEUE's partitions, deepest backlog first: queued, running, weight.

    Queued jobs are counted up to 10000 per partition (shown as 10000+), and at
    most 1000 partitions with queued jobs are visited (in key order): never a
    scan of the jobs table.
    """
    check_list_args(queue, limit)
    with cli.connect() as conn:
        found = list_partitions(conn, cli.schema, queue, limit=limit)
    if as_json:
        print_json(
            {"queue": queue, "partitions": [p.to_dict() for p in found.rows], "more": found.more}
        )
        return
    if not found.rows:
        click.echo(f"queue {queue} has no partitioned jobs queued or running, and no weights set")
        return
    lines = table(
        ["PARTITION", "QUEUED", "RUNNING", "WEIGHT"],
        [
            [
                p.partition_key,
                f"{p.queued}+" if p.capped else str(p.queued),
                str(p.running),
                _weight(p.weight),
            ]
            for p in found.rows
        ],
        right={1, 2, 3},
    )
    click.echo("\n".join(lines))
    if found.more:
        click.echo(
            f"(more than {SCAN_MAX} partitions have queued jobs: the first {SCAN_MAX} by key "
            "were counted)"
        )
