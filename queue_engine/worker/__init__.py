"""The claim worker: one process, one job at a time, one database connection.

:class:`~queue_engine.worker.loop.Worker` is the loop (claim, execute, finish),
:mod:`.executor` runs any kind of handler, :mod:`.outcomes` turns what a handler
did into the guarded finish, :mod:`.store` holds the worker's SQL and
:mod:`.heartbeat` keeps the worker's row and its jobs' leases alive.
"""

from __future__ import annotations

from queue_engine.worker.loop import Worker
from queue_engine.worker.settings import WorkerSettings

__all__ = ["Worker", "WorkerSettings"]
