"""Tasks for the workflow invariant tests (``queue-claim-worker --app wf_app``).

One task, ``wf.node``, runs every node. Its fate is in its args (decided by the
test's seeded generator, so the expected end of every node can be computed
before the run): ``ok`` returns, ``fail`` raises :class:`Permanent` (``fail_once``
only the first time the node runs: a retried workflow then succeeds), ``skip``
raises :class:`Skip`. Before that, it appends one JSON line to the file
``args["log"]`` (a single ``write`` on an ``O_APPEND`` file: lines of
concurrent processes never interleave) saying which attempt of which node ran
where and when, and what the claim told it about its parents: the test reads
those lines to count executions and to check that no node started before its
parents had ended. ``sleep`` makes a node last; ``slow`` makes it sleep in
short steps with a cancel check between them (for the cancel test).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from queue_engine import Permanent, Skip, task
from queue_engine.producer.context import JobContext

QUEUE = "wfa"


def _log(ctx: JobContext, path: str, started: float) -> None:
    parents = ctx.parents
    line = json.dumps(
        {
            "id": ctx.job.id,
            "wf": ctx.workflow_id,
            "node": ctx.node,
            "attempt": ctx.job.attempt,
            "pid": os.getpid(),
            "t": started,
            "n_parents": len(parents),
            # Parents that had not succeeded when the claim read them: each must be
            # behind a ``finished`` edge and in a final state.
            "not_ok": {name: p.status for name, p in parents.items() if p.status != "succeeded"},
        }
    )
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@task("wf.node", queue=QUEUE, max_attempts=100)
def node(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Log this execution, last ``sleep`` (or ``slow``) seconds, then meet ``fate``."""
    started = time.time()
    _log(ctx, str(args["log"]), started)
    sleep = float(args.get("sleep", 0))
    if sleep > 0:
        time.sleep(sleep)
    slow = float(args.get("slow", 0))
    end = time.monotonic() + slow
    while time.monotonic() < end:
        ctx.beat()  # raises JobCanceled once the workflow's cancel reaches this node
        time.sleep(0.02)
    fate = args.get("fate", "ok")
    if fate == "fail_once":
        # Fails the first time this node runs, succeeds when re-run (a retry).
        marker = f"{args['log']}.{ctx.job.id}.failed"
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise Permanent(f"node {ctx.node}: fails once")
        fate = "ok"
    if fate == "fail":
        raise Permanent(f"node {ctx.node}: fate says fail")
    if fate == "skip":
        raise Skip(f"node {ctx.node}: fate says skip")
    return {"node": ctx.node}
