"""The scheduler: cron-like periodic jobs, enqueued exactly once per slot across replicas.

What a schedule *is* belongs to the application and lives with the producer
API: :mod:`queue_engine.producer.cron` (expressions, time zones and the DST
rule) and :mod:`queue_engine.producer.schedules` (:class:`ScheduleSpec` and the
``@periodic`` decorator). This package is the daemon that runs them:

- :mod:`~queue_engine.scheduler.store` — the ``schedules`` table (shared with
  ``queue-ctl schedules`` and the dashboard);
- :mod:`~queue_engine.scheduler.ticker` — due-slot decisions and the
  exactly-once protocol (read its docstring first);
- :mod:`~queue_engine.scheduler.scheduler` — the services the ``queue-scheduler``
  process runs on the shared daemon runtime (:mod:`queue_engine.daemon`).

Nothing is imported here: ``import queue_engine.scheduler.store`` (the CLI,
the dashboard) loads the store, not the ticker.
"""
