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
"""

from __future__ import annotations

from queue_engine.scheduler.cron import Trigger, check_timezone, parse
from queue_engine.scheduler.schedules import (
    SCHEDULE_ARG,
    ScheduleSpec,
    periodic,
    schedule_registry,
)
from queue_engine.scheduler.ticker import (
    Fired,
    SlotPlan,
    Ticker,
    TickResult,
    due_slots,
    plan_slots,
)

__all__ = [
    "SCHEDULE_ARG",
    "Fired",
    "ScheduleSpec",
    "SlotPlan",
    "TickResult",
    "Ticker",
    "Trigger",
    "check_timezone",
    "due_slots",
    "parse",
    "periodic",
    "plan_slots",
    "schedule_registry",
]
