"""Tasks for the fast-recovery process tests (``queue-claim-worker --app liveness_app``).

The first attempt of each task blocks for a long time, in a way chosen by the
task, so the test can kill or freeze the worker mid-job; every later attempt
returns at once with the pid that ran it, so the test can tell which worker
finished the job.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from queue_engine import task
from queue_engine.producer.context import JobContext

QUEUE = "liveness"


def _done(ctx: JobContext) -> dict[str, Any]:
    return {"pid": os.getpid(), "attempt": ctx.job.attempt}


@task("liveness.slow_first", queue=QUEUE, max_attempts=3)
def slow_first(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Attempt 1 sleeps (interruptibly, in Python) for ``sleep`` seconds; later ones return."""
    if ctx.job.attempt == 1:
        time.sleep(float(args.get("sleep", 120)))
    return _done(ctx)


@task("liveness.gil_hang_first", queue=QUEUE, max_attempts=3)
def gil_hang_first(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Attempt 1 calls libc ``sleep`` through ``ctypes.PyDLL``, which keeps the GIL held.

    Every thread of the process freezes (heartbeat and lease renewer included)
    while the process and its database session stay alive: the case only the
    dead-worker sweep and the lease can catch.
    """
    if ctx.job.attempt == 1:
        libc = ctypes.PyDLL(None)
        libc.sleep(int(args.get("sleep", 30)))
    return _done(ctx)
