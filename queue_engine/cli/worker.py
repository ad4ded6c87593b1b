"""``queue-claim-worker``: run one claim worker process for one queue.

Exit codes (:class:`~queue_engine.foundation.exit_codes.ExitCode`; systemd restarts on
them; docs/reference/exit-codes.md): ``OK`` clean stop (SIGTERM/SIGINT; the
running job finished, or was given back after ``QUEUE_ENGINE_SHUTDOWN_GRACE_S``),
``USAGE`` bad option or setting, app module that does not import,
``UNAVAILABLE`` the database was unreachable at start for
``QUEUE_ENGINE_CONNECT_RETRY_S``, ``WATCHDOG`` a job exceeded its wall-clock
budget, ``STALL`` a job stalled (stall watchdog), ``HARD_STOP`` a job ignored a
cancel, or its lease was lost and it did not stop, ``RECYCLE`` a recycling
limit (``--max-jobs``, ``--max-rss``, ``--max-age``) was reached between jobs,
``INTERRUPTED`` a second SIGTERM/SIGINT ended the process at once. The
lifecycle is the shared :mod:`queue_engine.daemon` runtime, as for
``queue-orchestrator`` and ``queue-scheduler``.
"""

from __future__ import annotations

import click

from queue_engine.cli.common import (
    dsn_option,
    log_options,
    run_cli,
    schema_option,
    setting_option,
)
from queue_engine.foundation import settings as table
from queue_engine.foundation.logs import setup_logging
from queue_engine.foundation.version import __version__

PROG = "queue-claim-worker"


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@setting_option(table.QUEUE)
@setting_option(table.APP)
@dsn_option
@schema_option
@setting_option(table.PREFETCH)
@setting_option(table.WARM_KEY)
@setting_option(table.MAX_JOBS, type=click.IntRange(0), metavar="N")
@setting_option(table.MAX_RSS_MB, type=click.IntRange(0), metavar="MB")
@setting_option(table.MAX_AGE)
@log_options
@click.version_option(__version__, prog_name=PROG)
def worker(
    queue: str | None,
    app: str | None,
    dsn: str,
    schema: str,
    prefetch: int,
    warm_key: str | None,
    max_jobs: int | None,
    max_rss: int | None,
    max_age: float | None,
    log_format: str,
    log_level: str,
) -> int:
    """Claim and run jobs of one queue, one at a time, until SIGTERM or SIGINT.

    Other settings come from the environment: QUEUE_ENGINE_POLL_S (1.0),
    QUEUE_ENGINE_HEARTBEAT_S (10), QUEUE_ENGINE_LEASE_TTL_S (60),
    QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT (off), QUEUE_ENGINE_CONNECT_RETRY_S (10),
    QUEUE_ENGINE_DEFAULT_TIMEOUT_S (3600), QUEUE_ENGINE_SHUTDOWN_GRACE_S (30),
    QUEUE_ENGINE_CANCEL_GRACE_S (30), QUEUE_ENGINE_ZOMBIE_GRACE_S (10),
    QUEUE_ENGINE_AFFINITY_WAIT_S (10), QUEUE_ENGINE_RECONNECT_MAX_S (10).
    """
    # The worker's machinery (and the driver under it) is imported once the
    # options are read, so --help and a usage error answer at once.
    from queue_engine.producer.tasks import load_app
    from queue_engine.worker.loop import Worker
    from queue_engine.worker.settings import WorkerSettings

    setup_logging(log_format, log_level)
    if not queue:
        raise click.UsageError("no queue given: pass --queue NAME or set QUEUE_ENGINE_QUEUE")
    if not app:
        raise click.UsageError("no app module given: pass --app MODULE or set QUEUE_ENGINE_APP")
    settings = WorkerSettings.from_env(
        queue=queue,
        app=app,
        dsn=dsn,
        schema=schema,
        prefetch=prefetch,
        warm_key=warm_key,
        max_jobs=max_jobs,
        max_rss_mb=max_rss,
        max_age_s=max_age,
    )
    return Worker(settings, load_app(settings.app)).main()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    run_cli(worker, PROG, argv)
