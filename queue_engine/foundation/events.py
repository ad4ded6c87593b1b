"""The catalogue of every log event name the daemons can emit.

Event names (``job.succeeded``, ``reaper.requeued``, ``worker.flagged_dead``)
are the first word of a text log line and the ``event`` key of a JSON one
(:mod:`queue_engine.foundation.logs`). Operators grep for them, alert on them and route
them in log pipelines, so they are a **public contract**, like a CLI option:

- a name is only ever *added*; it is never renamed or removed without a
  CHANGELOG entry (under "Changed" or "Removed"), because a silent rename
  breaks somebody's alert without any error;
- every name matches :data:`EVENT_NAME_RE` (``<prefix>.<what>``, lower-case
  snake_case parts), so a pipeline can split on the first dot;
- every name is documented in ``docs/reference/log-events.md``.

:func:`queue_engine.foundation.logs.log_event` does **not** check names at run time: a
typo must never cost a log line or crash a daemon. The check is static, in
``tests/unit/test_log_events.py``: it finds every name the code can emit
(string literals, and the computed ones: ``job.<outcome kind>``,
``watchdog.<trip kind>``, ``<service name>.run`` / ``.error``, and
``<role>.started`` ... for the roles of :data:`queue_engine.daemon.DAEMON_ROLES`) and fails when
one is missing here, when an entry here is no longer emitted, or when the
reference page is missing one.

The catalogue is grouped by the daemon that emits the event (the ``daemon``
column of the reference page), which is not always the name's prefix: the
orchestrator logs ``worker.gone`` about a worker. Each entry maps the name to
one line saying what happened.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

#: The naming rule: two or more dot-separated parts of lower-case letters and ``_``.
EVENT_NAME_RE: Final = re.compile(r"^[a-z_]+(\.[a-z_]+)+$")

_WORKER: Final[dict[str, str]] = {
    # worker.*: the process's own lifecycle.
    "worker.started": "registered in the workers table and claiming from its queue",
    "worker.stopping": "SIGTERM/SIGINT received; the running job has the shutdown grace to finish",
    "worker.stopped": "clean stop: outcomes flushed, the worker row marked stopped",
    "worker.exit_now": "a second SIGTERM/SIGINT: exiting at once (exit 130); the job is recovered by the orchestrator or its lease",
    "worker.tasks_not_published": "the worker's role may not publish its tasks' defaults (migration 0028's grants); it runs without publishing",
    "worker.waiting_for_database": "the database is unreachable at start; retrying until the connect deadline (then exit 69)",
    "worker.db_error": "a statement failed on a connection error; reconnecting after a backoff",
    "worker.reconnected": "connected again after connection errors",
    "worker.orphans_released": "jobs running under this worker's id that it does not hold were given back",
    "worker.shutdown_flush_failed": "the outcomes held at shutdown could not be written; their leases will recover the jobs",
    "worker.parked": "the worker was parked by an operator control: it claims nothing until unparked",
    "worker.unparked": "a parked worker was unparked and claims again",
    "worker.stop_requested": "queue-ctl stop named this worker: between jobs, it stops and exits 0",
    "worker.stop_now": "queue-ctl stop --now named this worker: its running job is given back at once, exit 0",
    "worker.scale_slot_taken": "the worker took one of its queue's scale slots and may claim",
    "worker.scale_slot_released": "the worker gave its queue's scale slot back",
    "worker.controls_changed": "the worker saw its operator controls change and applied them",
    "worker.recycle": "a recycling limit (max jobs, RSS, age) was reached between jobs: it stops, gives back prefetched jobs, exits 79",
    # job.*: one line per job outcome and per incident of a job.
    "job.started": "a handler starts a job (debug only; carries the masked arguments)",
    "job.succeeded": "the handler returned; the job is succeeded (debug in a worker with prefetch > 1)",
    "job.succeeded_batch": "a prefetching worker's successes written by one statement: one line for all of them",
    "job.skipped": "the handler raised or returned Skip; the job is skipped (final)",
    "job.failed": "the job failed for good (permanent error, attempts spent, bad result or unknown task)",
    "job.retry_scheduled": "the handler raised; the job is queued again after the retry delay",
    "job.snoozed": "the handler snoozed; the job is queued again after the delay, attempt not counted",
    "job.canceled": "the job ended canceled (a cancel request, or a hard stop after an ignored cancel)",
    "job.released": "a prefetched job that never started was given back (attempt not counted)",
    "job.given_back": "the shutdown grace ran out; the running job was given back (attempt not counted)",
    "job.finish_ignored": "an outcome was not written: the job is no longer this worker's running attempt",
    "job.lease_lost": "the worker lost a job's lease; the job is stopped and its outcome not written",
    "job.zombie_stopped": "a job whose lease was lost stopped at a checkpoint; no outcome written",
    "job.zombie_skipped": "a prefetched job found no longer this worker's was never run",
    "job.lock_key_busy": "another session holds the job's lock key; the worker waits for it",
    # watchdog.*: the watchdog ends the process (one per trip kind).
    "watchdog.timeout": "a job exceeded its wall-clock budget; recorded, then exit 75",
    "watchdog.stall": "a job with stall_timeout_s stopped reporting progress; recorded, then exit 76",
    "watchdog.cancel": "a handler ignored a cancel for the grace; marked canceled, then exit 77",
    "watchdog.zombie": "a job whose lease was lost did not stop within the grace; exit 77, nothing written",
    "watchdog.give_back": "the SIGTERM grace ran out; the job is given back, then exit 0",
    "watchdog.record_failed": "the watchdog could not record its trip; the lease or fast recovery will",
    "watchdog.hard_deadline_off": "the hard deadline's timer could not be armed; jobs run without it",
    # heartbeat.failed: only a heartbeat with a cadence of its own (the worker's) keeps ticking.
    "heartbeat.failed": "a worker heartbeat could not be written; retried at the next beat",
}

_EVERY_DAEMON: Final[dict[str, str]] = {
    # Every daemon's heartbeat is the runtime's one Heartbeat service, named ``heartbeat``.
    "heartbeat.run": "one heartbeat tick (debug)",
    "heartbeat.error": "a heartbeat run raised; retried with backoff",
}

_ORCHESTRATOR: Final[dict[str, str]] = {
    "orchestrator.waiting_for_database": "the database is unreachable at start; retrying",
    "orchestrator.migrated": "this process applied a migration (debug)",
    "orchestrator.schema_migrated": "this process brought the schema up to date (one line, however many migrations)",
    "orchestrator.started": "registered in the workers table; the leader election starts",
    "orchestrator.http_started": "serving /metrics and /health",
    "orchestrator.stopping": "SIGTERM/SIGINT received; resigning and stopping the services",
    "orchestrator.stopped": "clean stop: leadership released, the row marked stopped",
    "orchestrator.exit_now": "a second SIGTERM/SIGINT during the stop: exiting at once (exit 130)",
    "orchestrator.leader_acquired": "this process now leads (reaper, sweeps and pruner run here)",
    "orchestrator.leader_lost": "stepped down: the election connection failed or the lock is gone",
    "orchestrator.leader_released": "gave up leadership on a clean stop",
    "orchestrator.db_unavailable": "the election connection cannot connect (warning once, then debug)",
    "orchestrator.db_available": "the election connection works again after failures",
    "leader.run": "one election round (debug)",
    "leader.error": "an election round raised; retried with backoff",
    "reaper.requeued": "jobs whose lease expired are queued again",
    "reaper.lost": "jobs whose lease expired had no attempts left and are lost",
    "reaper.canceled": "jobs whose lease expired had a cancel requested and are canceled",
    "reaper.run": "one lease sweep (info when it moved jobs, else debug)",
    "reaper.error": "a lease sweep raised; retried with backoff",
    "worker.flagged_dead": "a worker stopped heartbeating while it owns running jobs",
    "worker.flag_cleared": "a worker flagged dead heartbeats again",
    "dead_workers.run": "one dead-worker sweep (info when it flagged or cleared, else debug)",
    "dead_workers.error": "a dead-worker sweep raised; retried with backoff",
    "worker.gone": "a worker's database session ended; its running jobs were recovered at once",
    "fast_recovery.lost": "jobs recovered from a gone worker had no attempts left and are lost",
    "fast_recovery.run": "one fast-recovery check (info when it found gone workers, else debug)",
    "fast_recovery.error": "a fast-recovery check raised; retried with backoff",
    "pruner.run": "one retention run (info when it deleted jobs, events or stale worker rows, else debug)",
    "pruner.error": "a retention run raised; retried with backoff",
    "archiver.run": "one archiver run (info when it moved succeeded jobs to jobs_archive, else debug)",
    "archiver.error": "an archiver run raised; retried with backoff",
    "analyzer.run": "one statistics check (info when a burst made it ANALYZE jobs, else debug)",
    "analyzer.error": "a statistics check raised; retried with backoff",
    "vacuumer.run": "one dead-row check of jobs (debug; it VACUUMs when claims left enough)",
    "vacuumer.error": "a dead-row check or VACUUM raised; retried with backoff",
    "vacuumer.blocked": "a VACUUM of jobs could not remove the dead rows (xmin horizon held back)",
    "workflow.input_timed_out": "input nodes whose value did not come within their timeout_s were failed; children that require them are canceled",
    "input_timeouts.run": "one input-timeout sweep (info when it failed input nodes, else debug)",
    "input_timeouts.error": "an input-timeout sweep raised; retried with backoff",
    "workflow.stuck_node": "the 'no stuck node' check found waiting nodes whose parents have all ended: an engine bug to report; nothing is repaired",
    "stuck_nodes.run": "one 'no stuck workflow node' check (info when it found some, else debug)",
    "stuck_nodes.error": "a 'no stuck workflow node' check raised; retried with backoff",
    "metrics.serving": "the /metrics and /health HTTP server listens",
    "metrics.request": "one HTTP request to /metrics or /health (debug)",
    "metrics.scrape_failed": "a /metrics scrape could not read the database; queue_engine_database_up is 0",
}

_SCHEDULER: Final[dict[str, str]] = {
    "scheduler.waiting_for_database": "the database is unreachable at start; retrying",
    "scheduler.synced": "the schedules declared by the app were written to the schedules table",
    "scheduler.started": "registered in the workers table; the ticker starts",
    "scheduler.stopping": "SIGTERM/SIGINT received; stopping the services",
    "scheduler.stopped": "clean stop: the row marked stopped",
    "scheduler.exit_now": "a second SIGTERM/SIGINT during the stop: exiting at once (exit 130)",
    "scheduler.enqueued": "a schedule's slot fired: one job enqueued",
    "scheduler.workflow_started": "a workflow schedule's slot fired: its factory's workflow was started",
    "scheduler.workflow_unavailable": "a workflow schedule's factory is not declared by this scheduler's app: its slots are left to the scheduler that has it",
    "scheduler.skipped": "a slot was skipped because the previous job still runs (overlap=skip)",
    "scheduler.missed": "slots passed while no scheduler ran and are beyond the schedule's catchup",
    "scheduler.schedule_failed": "one schedule's slots could not be settled; the others go on",
    "scheduler.invalid_schedule": "a schedule row no longer validates (edited by hand); it is skipped",
    "scheduler.pruned": "old schedule_runs rows were deleted (debug)",
    "scheduler.run": "one ticker run (info when it enqueued, skipped, missed or failed, else debug)",
    "scheduler.error": "a ticker run raised; retried with backoff",
    "scheduler_listener.run": "one wait of the schedule-change listener (debug)",
    "scheduler_listener.error": "the schedule-change listener raised; retried with backoff",
}

_WEB: Final[dict[str, str]] = {
    "web.app_created": "the queue-web application was built (debug)",
    "web.live_error": "the dashboard aggregator could not read the fleet figures; pages show the last ones, retried after a backoff",
    "web.started": "queue-web starts listening on its host and port",
    "web.sign_in_link": "nothing configured to sign in with: queue-web printed a sign-in link (operator, until it stops) on stdout",
    "web.stopping": "SIGTERM/SIGINT received; requests in flight finish, then the pools close",
    "web.stopped": "clean stop: the server returned, exit 0",
    "web.exit_now": "a second SIGTERM/SIGINT during the stop: exiting at once (exit 130)",
    "web.db_unavailable": "a request found the database unreachable or not migrated; answered 503",
    "web.error": "a request raised an unexpected error; answered 500 (traceback at debug)",
    "web.refused_by_database": "the database refused a value the API's checks let through; "
    "answered 422 (a validation gap worth reporting)",
}

_APP: Final[dict[str, str]] = {
    # worker_processes.*: an application's WorkerProcesses (producer/worker_processes.py).
    "worker_processes.started": "a worker process beside the application was started",
    "worker_processes.exited": "a worker process beside the application exited; restarted by queue-ctl up's rule, or not (exit 0 unasked)",
    "worker_processes.given_up": "a worker process exited with a configuration error or in a crash loop: not restarted",
    "worker_processes.disabled": "QUEUE_ENGINE_WORKERS_BESIDE=off: the application starts no worker process",
    "worker_processes.stopping": "the application stops: SIGTERM to its worker processes, whose running jobs get the shutdown grace",
    "worker_processes.killed": "a worker process did not stop within the grace and margin: SIGKILL (its job is recovered)",
    "worker_processes.stopped": "every worker process of the application has exited",
}

#: The events grouped by the daemon(s) that emit them (the reference page's ``daemon`` column).
EVENT_GROUPS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "worker": MappingProxyType(_WORKER),
        "worker, orchestrator, scheduler": MappingProxyType(_EVERY_DAEMON),
        "orchestrator": MappingProxyType(_ORCHESTRATOR),
        "scheduler": MappingProxyType(_SCHEDULER),
        "web": MappingProxyType(_WEB),
        "app": MappingProxyType(_APP),
    }
)


def _merge(groups: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    """One flat read-only mapping; a name listed in two groups is a catalogue bug."""
    merged: dict[str, str] = {}
    for group, events in groups.items():
        for name, meaning in events.items():
            if name in merged:
                raise ValueError(f"event {name!r} is catalogued twice (again under {group!r})")
            merged[name] = meaning
    return MappingProxyType(merged)


#: Every event name the code can emit -> what it means. Add, never rename (see the module doc).
EVENTS: Final[Mapping[str, str]] = _merge(EVENT_GROUPS)


def is_known_event(name: str) -> bool:
    """True when ``name`` is catalogued (for tests and tools; the daemons never check)."""
    return name in EVENTS


def daemon_of(name: str) -> str:
    """The group (daemon label) that emits ``name``; KeyError when it is not catalogued."""
    for group, events in EVENT_GROUPS.items():
        if name in events:
            return group
    raise KeyError(name)
