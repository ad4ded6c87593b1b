"""``queue-scheduler``: enqueue periodic jobs, each slot exactly once, until told to stop.

Run one or more per cluster (two for availability: they need no election, the
database dedupes every slot). Exit codes (:class:`~queue_engine.foundation.exit_codes.ExitCode`):
``OK`` after SIGTERM/SIGINT (clean stop), ``INTERRUPTED`` when a second
SIGTERM/SIGINT arrives during that stop (exit at once), ``USAGE`` for a usage
or configuration error (bad option, app module that does not import, invalid
schedule), ``UNAVAILABLE`` when the database cannot be reached at start
(after ``QUEUE_ENGINE_CONNECT_RETRY_S`` of retries). A schema without the
schedules tables is waited for (the orchestrator migrates). Once running, a
lost database is not fatal: the scheduler reconnects with capped backoff and
catches up the slots still within the grace period. The lifecycle is the
shared :mod:`queue_engine.daemon` runtime.
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
from queue_engine.foundation.config import validate_schema
from queue_engine.foundation.errors import ConfigError
from queue_engine.foundation.logs import setup_logging
from queue_engine.foundation.version import __version__

PROG = "queue-scheduler"


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@dsn_option
@schema_option
@setting_option(table.APP)
@log_options
@click.version_option(__version__, prog_name=PROG)
def scheduler(dsn: str, schema: str, app: str | None, log_format: str, log_level: str) -> int:
    """Enqueue the periodic jobs of every enabled schedule, each slot exactly once.

    Schedules come from the schedules table (`queue-ctl schedules add`) and,
    with --app, from @periodic declarations synced into it at start. Settings:
    QUEUE_ENGINE_SCHEDULER_GRACE_S (60: older due slots count as missed),
    QUEUE_ENGINE_SCHEDULER_POLL_S (5: longest sleep between reads of the table),
    QUEUE_ENGINE_HEARTBEAT_S (10), QUEUE_ENGINE_RECONNECT_MAX_S (10),
    QUEUE_ENGINE_CONNECT_RETRY_S (10).
    """
    # Imported once the options are read, so --help and a usage error answer at once.
    from queue_engine.producer.schedules import ScheduleSpec, load_schedules
    from queue_engine.scheduler.scheduler import Scheduler, SchedulerSettings, check_specs

    try:
        validate_schema(schema)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--schema") from None
    setup_logging(log_format, log_level)
    specs: list[ScheduleSpec] = load_schedules(app) if app else []
    check_specs(specs)
    return Scheduler(SchedulerSettings.from_env(dsn, schema, app), specs).main()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``queue-scheduler`` console script."""
    run_cli(scheduler, PROG, argv)
