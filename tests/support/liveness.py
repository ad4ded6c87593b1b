"""The ``liveness_app`` workers of the recovery tests (fast recovery, the hard deadline).

Both start workers on one queue running ``tests/worker_apps/liveness_app.py``
(handlers that sleep, freeze holding the GIL, or exit) and wait for them idle.
"""

from __future__ import annotations

from functools import partial

import support.workers

QUEUE = "liveness"

#: ``spawn_worker(dsn, log_file=..., **env)``: a ``liveness_app`` worker logging at DEBUG.
spawn_worker = partial(
    support.workers.spawn_worker, queue=QUEUE, app="liveness_app", log_level="DEBUG"
)

#: ``idle_workers(conn)``: the idle workers of the ``liveness`` queue.
idle_workers = partial(support.workers.idle_workers, queue=QUEUE)
