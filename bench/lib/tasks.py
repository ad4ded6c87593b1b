"""The benches' task module: workers load it with ``--app lib.tasks``.

``noop`` does nothing, so a drain measures the engine alone; when the job
carries ``t`` (the producer's ``time.time()`` just before it enqueued), it
returns the wake latency ``time.time() - t`` as its result, read back from the
jobs table.
"""

from __future__ import annotations

import time
from typing import Any

import queue_engine


@queue_engine.task("noop", queue="bench")
def noop(args: dict[str, Any]) -> float | None:
    t = args.get("t")
    return None if t is None else time.time() - float(t)


@queue_engine.task("sleep", queue="bench")
def sleep(args: dict[str, Any]) -> None:
    """A short handler (``ms``, default 2): workers busy as with real work (bench/fairness.py)."""
    time.sleep(float(args.get("ms", 2)) / 1000)
