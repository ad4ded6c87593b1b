"""The tasks of ``queue-ctl demo``: one of each kind of handler the engine runs.

Workers load this module with ``--app queue_engine.demo.app``. Each task shows
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

``queue-ctl demo --workflow`` runs the ``demo.wf.*`` tasks as one workflow:
``fetch`` lists items, one ``part`` per item (fan-out) gets its item through a
``$result`` reference in its args, ``merge`` (fan-in) adds up the parts'
results from ``ctx.parents``, an input node waits for an approval, and
``publish`` reads that approval.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from queue_engine.producer.retry import FixedBackoff
from queue_engine.producer.tasks import task

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


# -- the workflow demo (queue-ctl demo --workflow) -------------------------------------


@task("demo.wf.fetch", queue=QUEUE)
def wf_fetch(args: dict[str, Any]) -> dict[str, Any]:
    """List the items to work on; each ``part`` node refers to one by ``$result``."""
    time.sleep(float(args.get("sleep_s", 0.2)))
    return {"items": [f"item-{i}" for i in range(int(args.get("items", 5)))]}


@task("demo.wf.part", queue=QUEUE)
def wf_part(args: dict[str, Any]) -> dict[str, Any]:
    """Work on one item (its args hold the item itself, resolved from fetch's result)."""
    time.sleep(float(args.get("sleep_s", 0.3)))
    item = str(args["item"])
    return {"item": item, "size": len(item) * 10}


@task("demo.wf.merge", queue=QUEUE)
def wf_merge(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Fan-in: add up every part's result, read from ``ctx.parents`` by node name."""
    sizes = {name: p.result["size"] for name, p in ctx.parents.items() if p.result}
    return {"parts": len(sizes), "total_size": sum(sizes.values())}


@task("demo.wf.publish", queue=QUEUE)
def wf_publish(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """Publish once approved: the input node's value is its parent's result."""
    approval = ctx.parent_results.get("approve") or {}
    return {"published": True, "approved_by": approval.get("by")}
