"""How a job's state reads to a person: the status the dashboard and ``queue-ctl`` show.

Display only. The database knows a delayed job as ``queued`` (with an
``available_at`` in the future) and a workflow's input node as a ``waiting``
job of the task ``queue-engine:input``; both read wrong in a list ("queued"
for a job that will not run for an hour, a pseudo-task for an input nobody
has given yet). The pages and the command line show them as what they are,
``scheduled`` and ``awaiting input``, from these functions, so the two faces
always agree. Nothing here changes what is stored, filtered on, or answered
by the JSON API (``status`` stays the stored one).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from queue_engine.operator.stats import format_duration
from queue_engine.producer.workflows.spec import INPUT_TASK

#: A queued job whose ``available_at`` is still ahead.
SCHEDULED = "scheduled"
#: An input node whose parents have all ended: it waits for its value.
AWAITING_INPUT = "awaiting input"


class Shown(Protocol):
    """What :func:`shown_status` reads of a job (a ``Job``, a row of the jobs list)."""

    @property
    def status(self) -> str: ...

    @property
    def task(self) -> str: ...

    @property
    def available_at(self) -> datetime | None: ...

    @property
    def pending_parents(self) -> int | None: ...


def is_input(task: str) -> bool:
    """True for a workflow input node (its job is a placeholder, no handler runs it)."""
    return task == INPUT_TASK


def awaiting_input(task: str, status: str, pending_parents: int | None) -> bool:
    """True for an input node that is ready for its value (every parent ended)."""
    return is_input(task) and status == "waiting" and not pending_parents


def scheduled(status: str, available_at: datetime | None, now: datetime) -> bool:
    """True for a queued job that may not be claimed before a later moment (delay, backoff)."""
    return status == "queued" and available_at is not None and available_at > now


def shown_status(job: Shown, now: datetime) -> str:
    """The status a person reads: ``scheduled``, ``awaiting input``, or the stored one."""
    if scheduled(job.status, job.available_at, now):
        return SCHEDULED
    if awaiting_input(job.task, job.status, job.pending_parents):
        return AWAITING_INPUT
    return str(job.status)


def runs_in(available_at: datetime, now: datetime) -> str:
    """When a scheduled job becomes claimable: ``in 4m05s``, or ``due`` once that passed."""
    seconds = (available_at - now).total_seconds()
    return "due" if seconds <= 0 else "in " + format_duration(seconds)
