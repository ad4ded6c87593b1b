"""The claim worker: one process, one job at a time, one database connection.

:class:`~queue_engine.worker.loop.Worker` is the main loop that wires the parts,
run by the daemons' shared runtime (:mod:`queue_engine.daemon`: signals,
start-up, heartbeat, systemd): :mod:`.connection` (the session, reconnects,
LISTEN), :mod:`.jobs` (held, ready and pending), :mod:`.gate` (operator
controls), :mod:`.flush` (finish-and-claim), :mod:`.runner` (one job:
:mod:`.executor` runs any kind of handler, :mod:`.outcomes` turns what it did
into the guarded finish), :mod:`.renewal` (the heartbeat's target: the
worker's row and its jobs' leases), :mod:`.watchdog` (ends a job the handler
cannot or will not end), :mod:`.liveness` (the health gate of the systemd
pings, watchdog trip records) and :mod:`.handler_connections`
(``ctx.connect()``). :mod:`.store` holds the worker's SQL.
"""

from __future__ import annotations

from queue_engine.worker.loop import Worker
from queue_engine.worker.settings import WorkerSettings

__all__ = ["Worker", "WorkerSettings"]
