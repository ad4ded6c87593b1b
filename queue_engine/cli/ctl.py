"""``queue-ctl``: the operator and developer command line.

This module is the group (``--dsn``, ``--schema``) and the table of its
subcommands, each in its own module and imported only when it runs
(:class:`~queue_engine.cli.lazy.LazyGroup`): a call pays for the one command
it makes, so ``queue-ctl status 1`` does not load the fleet supervisor, the
orchestrator's sweeps or the workflow renderer. Imports run one way: the
subcommand modules import :mod:`~queue_engine.cli.context`,
:mod:`~queue_engine.cli.render` and :mod:`~queue_engine.cli.common`, and
nothing imports ``ctl``.

Each subcommand opens one connection (through the group's
:class:`~queue_engine.cli.context.CliContext`), does one thing, and exits.
Errors are one line on stderr with the exit codes of
:mod:`queue_engine.cli.common`.
"""

from __future__ import annotations

import click

from queue_engine.cli.common import dsn_option, legacy_notices, run_cli, schema_option
from queue_engine.cli.context import CliContext
from queue_engine.cli.lazy import LazyCommand, LazyGroup
from queue_engine.foundation.config import validate_schema
from queue_engine.foundation.errors import ConfigError
from queue_engine.foundation.version import __version__

#: Every subcommand: where its click command lives (``module:attribute``, imported when it
#: runs) and the short help ``--help`` lists (held to the command's docstring by
#: tests/unit/test_cli_lazy.py).
COMMANDS: dict[str, LazyCommand] = {
    # migrations and jobs
    "migrate": LazyCommand(
        "queue_engine.cli.migrate:migrate",
        "Apply pending migrations (safe to run from several processes at once).",
    ),
    "downgrade": LazyCommand(
        "queue_engine.cli.migrate:downgrade", "Revert migrations down to a version."
    ),
    "enqueue": LazyCommand(
        "queue_engine.cli.jobs:enqueue", "Enqueue one job of TASK and print its id."
    ),
    "status": LazyCommand("queue_engine.cli.jobs:status", "Show one job."),
    "cancel": LazyCommand(
        "queue_engine.cli.jobs:cancel",
        "Cancel a queued job, or ask a running job to stop at its next checkpoint.",
    ),
    "retry": LazyCommand(
        "queue_engine.cli.jobs:retry", "Put a failed, canceled or lost job back in its queue."
    ),
    "list": LazyCommand("queue_engine.cli.jobs:list_jobs", "List jobs, newest first."),
    # local fleet, demo and benchmark
    "demo": LazyCommand(
        "queue_engine.demo.demo:demo",
        "Run orchestrator + workers on sample jobs, with live progress and a summary.",
    ),
    "bench": LazyCommand(
        "queue_engine.demo.bench:bench",
        "Measure enqueue rate, drain throughput and wake latency with real worker processes.",
    ),
    "up": LazyCommand(
        "queue_engine.cli.up:up",
        "Run an orchestrator, a scheduler and N workers per queue; restart the crashed.",
    ),
    "tasks": LazyCommand(
        "queue_engine.cli.tasks:tasks_cmd",
        "Tasks whose defaults workers published: the defaults, from which workers, when.",
    ),
    "migrate-settings": LazyCommand(
        "queue_engine.cli.migrate_settings:migrate_settings",
        "Print the environment of queue-engine translated from dataloader's, pqrun's or "
        "queue_workflows'.",
    ),
    "dsn": LazyCommand(
        "queue_engine.cli.dsn:dsn_cmd",
        "Print the DSN in use: --dsn, QUEUE_ENGINE_DSN, or the local fleet's (queue-ctl up).",
    ),
    # schedules, workflows, retention, roles
    "schedules": LazyCommand(
        "queue_engine.cli.schedules:schedules",
        "Manage periodic schedules (run by queue-scheduler).",
    ),
    "workflows": LazyCommand(
        "queue_engine.cli.workflows:workflows",
        "Workflows (DAGs of jobs): list, show the DAG, cancel, retry, provide an input.",
    ),
    "import": LazyCommand(
        "queue_engine.cli.import_jobs:import_cmd",
        "Move the unfinished jobs and workflows of dataloader, pqrun or queue_workflows here.",
    ),
    "prune": LazyCommand(
        "queue_engine.cli.prune:prune",
        "Delete finished jobs and whole finished workflows past retention, and stale worker rows.",
    ),
    "roles": LazyCommand(
        "queue_engine.cli.roles:roles",
        "Print the SQL creating worker/producer/monitor group roles and their grants.",
    ),
    # views
    "stats": LazyCommand(
        "queue_engine.cli.views:stats_cmd",
        "Per-queue depth, throughput, wait/run times, workers and a replicas suggestion.",
    ),
    "workers": LazyCommand(
        "queue_engine.cli.views:workers_cmd",
        "Every worker, orchestrator and scheduler process, with heartbeat age, RSS, CPU and load.",
    ),
    "show": LazyCommand(
        "queue_engine.cli.views:show_cmd",
        "One job with its event timeline (every transition, oldest first) and its worker deaths.",
    ),
    "top": LazyCommand(
        "queue_engine.cli.views:top_cmd",
        "Live view of queues and workers, refreshed every second (q or Ctrl-C to quit).",
    ),
    # operator controls
    "pause": LazyCommand(
        "queue_engine.cli.controls:pause_cmd",
        "Stop workers claiming from QUEUE; running jobs finish, new jobs wait.",
    ),
    "resume": LazyCommand(
        "queue_engine.cli.controls:resume_cmd",
        "Let workers claim from QUEUE again; its idle workers are woken at once.",
    ),
    "scale": LazyCommand(
        "queue_engine.cli.controls:scale_cmd",
        "Let at most N workers of QUEUE claim, cluster-wide (0: none; `off`: no limit).",
    ),
    "rate": LazyCommand(
        "queue_engine.cli.controls:rate_cmd",
        "Start at most R jobs per second of QUEUE, cluster-wide (`off`: no limit).",
    ),
    "park": LazyCommand(
        "queue_engine.cli.controls:park_cmd",
        "Keep workers alive but claiming nothing: a host's (now and later) or one worker.",
    ),
    "unpark": LazyCommand(
        "queue_engine.cli.controls:unpark_cmd",
        "Remove parks: every park of a host, its park of one queue, or one worker's park.",
    ),
    "stop": LazyCommand(
        "queue_engine.cli.controls:stop_cmd",
        "Ask live workers to exit 0 after their current job (prefetched jobs go back).",
    ),
    "limits": LazyCommand(
        "queue_engine.cli.limits:limits",
        "Per-key limits: at most N jobs of a key running, at most R starting a second.",
    ),
    "partitions": LazyCommand(
        "queue_engine.cli.partitions:partitions",
        "Fair share across partitions (tenants): weights, and each partition's backlog.",
    ),
    "audit": LazyCommand(
        "queue_engine.cli.audit:audit",
        "Who changed which control (pause, scale, rate, park, stop, limits), newest first.",
    ),
    "controls": LazyCommand(
        "queue_engine.cli.controls:controls_cmd",
        "Every control in force: paused, scaled and rate-limited queues, parks, stop requests.",
    ),
}

#: Old systems' variables a subcommand reads, so it does not notice them as unread.
READS = {"up": frozenset({"WORKERS_JSON"})}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@dsn_option
@schema_option
@click.version_option(__version__, prog_name="queue-ctl")
@click.pass_context
def ctl(ctx: click.Context, dsn: str, schema: str) -> None:
    """Operate a queue-engine database: migrations, jobs, and a local demo."""
    try:
        validate_schema(schema)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--schema") from None
    if ctx.invoked_subcommand != "migrate-settings":  # it reads them, and says more
        legacy_notices("queue-ctl", READS.get(ctx.invoked_subcommand or "", frozenset()))
    given = ctx.get_parameter_source("schema") is not click.core.ParameterSource.DEFAULT
    ctx.obj = CliContext(given_dsn=dsn, given_schema=schema if given else None)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``queue-ctl`` console script."""
    run_cli(ctl, "queue-ctl", argv, notice=False)
