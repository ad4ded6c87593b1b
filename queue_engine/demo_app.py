"""The tasks of ``queue-ctl demo``: one of each kind of handler the engine runs.

Workers load this module with ``--app queue_engine.demo_app``. Each task shows
one behaviour, and the demo's summary makes it visible:

- ``demo.hello``: a plain function whose return value is stored as the result;
- ``demo.flaky``: fails its first attempt on purpose, then succeeds, retried
  after a short fixed backoff (``FixedBackoff(1)``) rather than the default
  exponential one, so the demo does not wait;
- ``demo.progress``: a generator; each yielded dict is recorded as the job's
  progress, which the demo shows live;
- ``demo.locked``: enqueued twice with one ``lock_key``, so the two never run
  at the same time even with two workers;
- ``demo.report``: enqueued with a delay; it only becomes claimable later.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from queue_engine.retry import FixedBackoff
from queue_engine.tasks import task

QUEUE = "demo"


@task("demo.hello", queue=QUEUE)
def hello(args: dict[str, Any]) -> dict[str, Any]:
    """Greet someone; the returned dict becomes the job's result."""
    time.sleep(float(args.get("sleep_s", 0.2)))
    return {"greeting": f"hello, {args.get('name', 'world')}"}


@task("demo.flaky", queue=QUEUE, max_attempts=3, retry=FixedBackoff(1))
def flaky(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Raise on the first attempt (as a flaky downstream service would), succeed on the next."""
    if ctx.job.attempt == 1:
        raise RuntimeError("first attempt fails on purpose (the demo's flaky downstream)")
    return {"succeeded_on_attempt": ctx.job.attempt}


@task("demo.progress", queue=QUEUE)
def progress(args: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Work in steps and yield ``{"done": i, "total": n}`` after each; the worker records it."""
    total = int(args.get("steps", 10))
    step_s = float(args.get("step_s", 0.25))
    for done in range(1, total + 1):
        time.sleep(step_s)
        yield {"done": done, "total": total}


@task("demo.locked", queue=QUEUE)
def locked(args: dict[str, Any]) -> dict[str, Any]:
    """Hold a shared resource for a moment; its lock_key keeps a second job from overlapping."""
    started = time.time()
    time.sleep(float(args.get("hold_s", 0.6)))
    return {"held_from": started, "held_until": time.time()}


@task("demo.report", queue=QUEUE)
def report(args: dict[str, Any]) -> dict[str, Any]:
    """A delayed job: enqueued with a delay, it runs a couple of seconds later."""
    return {"report": "ready"}
