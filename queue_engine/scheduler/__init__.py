"""The scheduler: cron-like periodic jobs, enqueued exactly once per slot across replicas.

- :mod:`~queue_engine.scheduler.cron` — expressions, time zones and the DST rule
  (pure; read its docstring for the rule);
- :mod:`~queue_engine.scheduler.schedules` — :class:`ScheduleSpec` and the
  ``@periodic`` decorator;
- :mod:`~queue_engine.scheduler.store` — the ``schedules`` table (shared with
  ``queue-ctl schedules``);
- :mod:`~queue_engine.scheduler.ticker` — due-slot decisions and the
  exactly-once protocol (read its docstring first);
- :mod:`~queue_engine.scheduler.scheduler` — the services the ``queue-scheduler``
  process runs on the shared daemon runtime (:mod:`queue_engine.daemon`).

This package re-exports only the declarations (cron and schedules): ``import
queue_engine`` runs this file (the public API re-exports ``@periodic``), and a
producer that only enqueues must not load the ticker and its service machinery.
Import the ticker and the process from their own modules.
"""

from __future__ import annotations

from queue_engine.scheduler.cron import Trigger, check_timezone, parse
from queue_engine.scheduler.schedules import (
    SCHEDULE_ARG,
    ScheduleSpec,
    periodic,
    schedule_registry,
)

__all__ = [
    "SCHEDULE_ARG",
    "ScheduleSpec",
    "Trigger",
    "check_timezone",
    "parse",
    "periodic",
    "schedule_registry",
]
