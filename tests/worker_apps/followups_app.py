"""Tasks for the follow-up tests (``ctx.enqueue``), imported by ``--app followups_app``.

``followups.parent`` buffers the follow-ups its args describe, then ends as
its args say: returns, raises (retried or permanent), snoozes, waits for a
cancel, returns a result that cannot be stored, or first waits for a file to
appear (so a process test can hold the job's row before the finish).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from queue_engine import FixedBackoff, Permanent, Snooze, task
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.context import JobContext
from queue_engine.producer.tasks import TaskRegistry, registry

QUEUE = "fu"
#: The default queue of the follow-ups: no worker of the tests runs it.
OUT = "fu.out"


def _options(item: dict[str, Any]) -> dict[str, Any]:
    """An item of ``children`` as enqueue options: ``run_at`` travels in JSON as ISO text."""
    options = {"queue": OUT, **item}
    if isinstance(options.get("run_at"), str):
        options["run_at"] = datetime.fromisoformat(options["run_at"])
    return options


@task("followups.parent", queue=QUEUE, max_attempts=3, retry=FixedBackoff(0.05))
def parent(args: dict[str, Any], ctx: JobContext) -> Any:
    ctx.enqueue_many([_options(item) for item in args.get("children", [])])
    if args.get("go_file"):
        deadline = time.monotonic() + 60
        while not Path(args["go_file"]).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    if ctx.job.attempt <= args.get("fail_times", 0):
        raise RuntimeError(f"failing attempt {ctx.job.attempt}")
    if args.get("permanent"):
        raise Permanent("never")
    if args.get("snooze"):
        raise Snooze(args["snooze"])
    if args.get("wait_cancel"):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ctx.beat()  # raises JobCanceled once the cancel is seen
            time.sleep(0.02)
    if args.get("bad_result"):
        return {1, 2}  # not JSON: the job fails
    return {"attempt": ctx.job.attempt}


@task("followups.steps", queue=QUEUE)
def steps(args: dict[str, Any], ctx: JobContext) -> Iterator[dict[str, Any]]:
    """A generator handler: buffers between checkpoints."""
    for n in range(args.get("n", 2)):
        ctx.enqueue("followups.child", queue=OUT, args={"n": n})
        yield {"step": n}


@task("followups.chain", queue=QUEUE)
def chain(args: dict[str, Any], ctx: JobContext) -> int:
    """Hands on to itself until ``left`` is 0: a chain run by the same worker."""
    left = int(args["left"])
    if left > 0:
        ctx.enqueue("followups.chain", queue=ctx.job.queue, args={"left": left - 1})
    return left


@task("followups.bad_options", queue=QUEUE, max_attempts=1)
def bad_options(args: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Tries each bad call; returns the errors and how many follow-ups stayed buffered."""
    ctx.enqueue("followups.child", queue=OUT, args={"good": True})
    errors = []
    for options in args["single"]:
        try:
            ctx.enqueue(**options)
        except (ValidationError, TypeError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    try:
        ctx.enqueue_many(args["many"])
    except ValidationError as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    return {"errors": errors, "buffered": len(ctx.followups)}


@task("followups.raise_bad", queue=QUEUE, max_attempts=1)
def raise_bad(args: dict[str, Any], ctx: JobContext) -> None:
    ctx.enqueue("followups.child", queue=OUT, priority=5000)


@task("followups.too_many", queue=QUEUE, max_attempts=1)
def too_many(args: dict[str, Any], ctx: JobContext) -> None:
    ctx.enqueue_many([{"task": "followups.child", "queue": OUT}] * args["n"])


@task("followups.child", queue=OUT)
def child(args: dict[str, Any]) -> dict[str, Any]:
    return args


NAMES = (
    "followups.parent",
    "followups.steps",
    "followups.chain",
    "followups.bad_options",
    "followups.raise_bad",
    "followups.too_many",
    "followups.child",
)
_private: TaskRegistry | None = None


def private_registry() -> TaskRegistry:
    """These tasks in a registry of their own, removed from the process-wide one."""
    global _private
    if _private is None:
        _private = TaskRegistry()
        for name in NAMES:
            definition = registry.get(name)
            assert definition is not None, name
            _private.register(definition)
            registry.unregister(name)
    return _private
