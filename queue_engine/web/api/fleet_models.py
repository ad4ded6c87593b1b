"""The answers of the fleet and schedule operations: queue controls, parks, stops, schedules.

Each mirrors the result the engine returns (:mod:`queue_engine.operator.controls`,
:mod:`queue_engine.scheduler.store`), so the OpenAPI document says what a
pause, a park or a run-now answers and a generated client gets typed
objects, not a bare ``object``. They are open (``extra="allow"``) like the
other answers: a field added later passes through.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from queue_engine.web.api.models import Open, QueueOut


class QueueKnown(QueueOut):
    """One queue's figures (``known: true``: it has jobs or controls)."""

    known: Literal[True]


class QueueUnknown(Open):
    """A queue nothing has used yet (no jobs, no controls)."""

    queue: str
    known: Literal[False]


class Paused(Open):
    """A pause: since when the queue is paused, and whether it already was."""

    queue: str
    paused_at: datetime
    was_paused: bool


class Resumed(Open):
    """A resume: whether the queue was paused before."""

    queue: str
    was_paused: bool


class Scaled(Open):
    """A scale: the limit before and after (null: no limit)."""

    queue: str
    previous: int | None
    limit: int | None
    woken: bool
    changed: bool


class Rated(Open):
    """A rate: rate and burst before and after (null: no limit)."""

    queue: str
    previous_rate: float | None
    previous_burst: int | None
    rate: float | None
    burst: int | None
    changed: bool


class Target(Open):
    """Which workers: a host (with an optional queue) or one worker."""

    host: str | None
    queue: str | None
    worker_id: str | None


class Parked(Open):
    """A park: the workers it holds now (later ones of a host park too)."""

    target: Target
    created: bool
    parked_at: datetime
    worker_ids: list[str]
    covered_by_host_park: bool
    host: str | None
    queue: str | None


class Unparked(Open):
    """An unpark: what it removed and what still parks the same workers."""

    target: Target
    removed: list[str | None] = Field(description="queues of the removed parks (null: all)")
    host_parked_at: datetime | None
    parked_worker_ids: list[str]
    host_parks: list[str]
    host: str | None


class StopRequested(Open):
    """One worker asked to exit after its current job."""

    worker_id: str
    host: str
    queue: str | None
    stop_requested_at: datetime
    already: bool
    now: bool = Field(description="a hard stop: the running job is given back at once")


class Stopped(Open):
    """The workers asked to stop."""

    stopped: list[StopRequested]


class QueueControl(Open):
    """A queue with a control in force."""

    queue: str
    paused: bool
    paused_at: datetime | None
    scale_limit: int | None
    rate_limit: float | None
    rate_burst: int | None
    updated_at: datetime


class ParkOut(Open):
    """One park: a host (queue null: all queues) or one worker."""

    id: int
    kind: str
    host: str | None
    queue: str | None
    worker_id: str | None
    parked_at: datetime
    live_workers: int


class PendingStop(Open):
    """A worker asked to stop that has not stopped yet."""

    worker_id: str
    host: str
    queue: str | None
    state: str
    stop_requested_at: datetime
    stop_now: bool = Field(default=False, description="a hard stop (`queue-ctl stop --now`)")


class ControlsOut(Open):
    """Every control in force."""

    queues: list[QueueControl]
    parks: list[ParkOut]
    stops: list[PendingStop]


class ScheduleSwitched(Open):
    """An enable or disable, and where the schedule is defined."""

    name: str
    enabled: bool
    source: str


class ScheduleRun(Open):
    """A run-now: the job it enqueued."""

    name: str
    job_id: int
