"""``queue-ctl demo``: the engine end to end on a throwaway database.

With no DSN it starts an embedded Postgres, migrates it, enqueues a set of
sample jobs through every enqueue path (single, bulk, delayed, idempotent,
deduplicated, locked), shows them, cancels and retries one, prints a summary
and stops everything. With a DSN it does the same against that database.
"""

from __future__ import annotations

from pathlib import Path

import click

from queue_engine.client import Client
from queue_engine.db import connect, describe_dsn
from queue_engine.embedded import database_for
from queue_engine.jobs import JobStatus
from queue_engine.migrate import Migrator

DEMO_QUEUE = "demo"


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of the embedded Postgres (default: a temp folder).",
)
@click.option("--keep", is_flag=True, help="Keep the embedded database folder afterwards.")
@click.pass_context
def demo(ctx: click.Context, data_dir: Path | None, keep: bool) -> None:
    """Run the engine end to end on an embedded Postgres (or on --dsn)."""
    schema = ctx.obj["schema"]
    if not ctx.obj["dsn"]:
        click.echo("no DSN configured: starting an embedded Postgres ...")
    with database_for(ctx.obj["dsn"], data_dir=data_dir, keep=keep) as dsn:
        click.echo(f"database: {describe_dsn(dsn)}")
        applied = Migrator(dsn, schema=schema).up()
        click.echo(f"migrated: {len(applied)} migration(s) applied")
        with connect(dsn) as conn:
            client = Client(conn=conn, schema=schema)
            first = client.enqueue(
                "demo.hello", queue=DEMO_QUEUE, args={"name": "world"}, idempotency_key="demo-hello"
            )
            same = client.enqueue(
                "demo.hello", queue=DEMO_QUEUE, args={"name": "world"}, idempotency_key="demo-hello"
            )
            click.echo(
                f"enqueued job {first.id} (created={first.created}); the same idempotency key "
                f"again returned job {same.id} (created={same.created})"
            )
            delayed = client.enqueue("demo.report", queue=DEMO_QUEUE, delay=3600)
            click.echo(
                f"enqueued job {delayed.id} to run at {delayed.available_at.isoformat(timespec='seconds')}"
            )
            ids = client.enqueue_many(
                [
                    {
                        "task": "demo.resize",
                        "queue": DEMO_QUEUE,
                        "args": {"image": i},
                        "lock_key": "images",
                    }
                    for i in range(20)
                ]
            )
            click.echo(f"bulk-enqueued {len(ids)} jobs: {ids[0]}..{ids[-1]}")
            canceled = client.cancel(ids[-1], message="canceled by the demo")
            click.echo(f"canceled job {canceled.id}: {canceled.status}")
            retried = client.retry(ids[-1], message="retried by the demo")
            click.echo(f"retried job {retried.id}: {retried.status}")
            jobs = client.list(queue=DEMO_QUEUE, limit=1000)
        counts = {s.value: sum(1 for j in jobs if j.status == s) for s in JobStatus}
        click.echo("summary: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
