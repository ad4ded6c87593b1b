"""The task of the failover test, imported by ``queue-claim-worker --app failover_app``.

Every run appends ``<job id> <attempt> <pid>`` to the file named by
``QE_FAILOVER_RUNS``: a record outside Postgres, so the test can count the
runs a failover repeated even though the servers disagree about them (the
new primary never saw a claim or a finish the old one lost).
"""

from __future__ import annotations

import os
import time
from typing import Any

from queue_engine import task
from queue_engine.producer.context import JobContext

QUEUE = "fo"


@task("mark", queue=QUEUE, max_attempts=5)
def mark(args: dict[str, Any], ctx: JobContext) -> None:
    """Record this run, then take ``sleep`` seconds."""
    line = f"{ctx.job.id} {ctx.job.attempt} {os.getpid()}\n".encode()
    fd = os.open(os.environ["QE_FAILOVER_RUNS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one short O_APPEND write: lines from several workers never mix
    finally:
        os.close(fd)
    time.sleep(float(args.get("sleep", 0)))
