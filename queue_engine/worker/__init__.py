"""The claim worker: one process, one job at a time, one database connection.

:class:`~queue_engine.worker.loop.Worker` is the loop (claim, execute, finish),
:mod:`.executor` runs any kind of handler, :mod:`.outcomes` turns what a handler
did into the guarded finish, :mod:`.store` holds the worker's SQL and
:mod:`.heartbeat` keeps the worker's row and its jobs' leases alive, and
:mod:`.watchdog` ends a job the handler cannot or will not end (budget, stall,
ignored cancel, zombie, SIGTERM grace) by recording why and exiting.
"""

from __future__ import annotations

from queue_engine.worker.loop import Worker
from queue_engine.worker.settings import WorkerSettings

__all__ = ["Worker", "WorkerSettings"]
