"""The task of ``queue-ctl bench``: a no-op, so the benchmark measures the engine alone.

Workers load it with ``--app queue_engine.demo.bench_app``; every job of the
``bench`` queue costs one claim and one finish and nothing else.
"""

from __future__ import annotations

from typing import Any

from queue_engine.producer.tasks import task

QUEUE = "bench"


@task("bench.noop", queue=QUEUE, max_attempts=1)
def noop(args: dict[str, Any]) -> None:
    """Do nothing."""
