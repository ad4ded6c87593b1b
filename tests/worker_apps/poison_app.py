"""Tasks for the poison-job process test (``queue-claim-worker --app poison_app``).

``poison.segfault`` kills its process on every attempt (a NULL read through
``ctypes``: SIGSEGV, no Python exception, nothing the worker can record);
``poison.sys_exit`` raises SystemExit, which the worker records as the
attempt's failure (it does not end the worker);
``poison.ok`` is an ordinary job of the same queue that returns the pid that
ran it after a short pause, so the test can tell both workers kept working.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Any

from queue_engine import FixedBackoff, task
from queue_engine.producer.context import JobContext

QUEUE = "poison"


@task("poison.segfault", queue=QUEUE, max_attempts=3)
def segfault(args: dict[str, Any], ctx: JobContext) -> None:
    """Read address 0: the process dies by SIGSEGV mid-job, every time."""
    ctypes.string_at(0)


@task("poison.sys_exit", queue=QUEUE, max_attempts=2, retry=FixedBackoff(0.05))
def sys_exit(args: dict[str, Any], ctx: JobContext) -> None:
    """``sys.exit(3)`` from inside the handler: a failed attempt, the worker goes on."""
    sys.exit(3)


@task("poison.ok", queue=QUEUE, max_attempts=3)
def ok(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Pause ``sleep`` seconds, then return the pid and attempt that ran the job."""
    time.sleep(float(args.get("sleep", 0.2)))
    return {"pid": os.getpid(), "attempt": ctx.job.attempt}
