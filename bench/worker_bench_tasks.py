"""Task module for ``bench/worker_bench.py`` (``--app worker_bench_tasks``).

``noop`` does nothing; when the job carries ``t`` (the producer's
``time.time()`` just before it enqueued), it returns the wake latency
``time.time() - t`` as its result, read back from the jobs table.
"""

from __future__ import annotations

import time
from typing import Any

import queue_engine


@queue_engine.task("noop", queue="bench")
def noop(args: dict[str, Any]) -> float | None:
    t = args.get("t")
    return None if t is None else time.time() - float(t)
