"""``queue-orchestrator``: migrate, then lead (or stand by) and run the sweeps until told to stop.

Run one or more per cluster under systemd. Exit codes
(:class:`~queue_engine.foundation.exit_codes.ExitCode`): ``OK`` after SIGTERM/SIGINT
(clean stop: leadership released, row marked stopped), ``INTERRUPTED`` when a
second SIGTERM/SIGINT arrives during that stop (exit at once), ``UNAVAILABLE``
when the database cannot be reached at start (after
``QUEUE_ENGINE_CONNECT_RETRY_S`` of retries), ``USAGE`` for a configuration
error, ``MIGRATION`` when a migration fails. Once running, a lost
database is not fatal: the process steps down, reconnects with backoff and
competes again.

Under systemd (``Type=notify``) it reports ``READY=1`` once migrated and
registered, a ``STATUS=`` line whenever its role changes (leader, standby,
database unavailable), ``WATCHDOG=1`` from its heartbeat when the unit sets
``WatchdogSec=``, and ``STOPPING=1`` when told to stop. Outside systemd none of
this is sent. The lifecycle is the shared :mod:`queue_engine.daemon` runtime.
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


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@dsn_option
@schema_option
@log_options
@setting_option(table.HTTP_PORT)
@setting_option(table.HTTP_HOST)
@click.version_option(__version__, prog_name="queue-orchestrator")
def orchestrator(
    dsn: str, schema: str, log_format: str, log_level: str, http_port: int | None, http_host: str
) -> int:
    """Apply migrations, elect a leader, and run the recovery sweeps on the leader.

    The leader runs the lease reaper and the dead-worker sweep every
    QUEUE_ENGINE_SWEEP_S (default 5), fast recovery every
    QUEUE_ENGINE_RECOVERY_S (default 1; 0 turns it off) and retention pruning
    every QUEUE_ENGINE_PRUNE_S (default 60). With --http-port it serves
    Prometheus /metrics and /health. Several orchestrators
    may run at once; one leads, the others take over within seconds if it goes.
    """
    # Imported once the options are read, so --help and a usage error answer at once.
    from queue_engine.orchestrator import Orchestrator, OrchestratorSettings

    try:
        validate_schema(schema)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--schema") from None
    setup_logging(log_format, log_level)
    settings = OrchestratorSettings.from_env(dsn, schema, http_port=http_port, http_host=http_host)
    return Orchestrator(settings).main()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``queue-orchestrator`` console script."""
    run_cli(orchestrator, "queue-orchestrator", argv)
