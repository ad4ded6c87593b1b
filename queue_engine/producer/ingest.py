"""Ingest tasks written as ``fn(reason)`` or ``fn(reason, args)``, as queue_workflows called them.

Our handlers take ``(args)`` or ``(args, ctx)``; a scheduled job says why it
was enqueued in ``args["_schedule"]["reason"]`` (``"schedule"`` for a slot,
``"manual"`` for ``queue-ctl schedules run-now``). :func:`ingest` wraps an
ingest function so it can be registered unchanged::

    @task("etl.fetch", queue="fetch")
    @ingest
    def fetch(reason, args):
        ...

The wrapper takes ``(args)``: it passes the reason (``"enqueued"`` for a job
enqueued directly, without ``_schedule``) and, to a two-parameter function,
the args without the reserved ``_schedule`` key.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.schedules import SCHEDULE_ARG

#: The reason passed for a job that no schedule enqueued.
ENQUEUED = "enqueued"


def reason_and_args(args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Why the job was enqueued, and its args without the reserved schedule key."""
    why = args.get(SCHEDULE_ARG)
    reason = why.get("reason") if isinstance(why, dict) else None
    rest = {k: v for k, v in args.items() if k != SCHEDULE_ARG}
    return (reason if isinstance(reason, str) else ENQUEUED), rest


def ingest(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], Any]:
    """Wrap ``fn(reason)`` or ``fn(reason, args)`` (plain or ``async``) as an ``(args)`` handler."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        raise ValidationError(f"cannot inspect the signature of ingest task {fn!r}") from None
    required = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        and p.default is inspect.Parameter.empty
    ]
    if len(required) not in (1, 2):
        raise ValidationError(
            f"ingest task {getattr(fn, '__qualname__', fn)!r} must take (reason) or "
            f"(reason, args), it takes {len(required)} required positional parameters"
        )
    with_args = len(required) == 2

    def call(args: dict[str, Any]) -> Any:
        reason, rest = reason_and_args(args)
        return fn(reason, rest) if with_args else fn(reason)

    handler: Callable[[dict[str, Any]], Any] = call
    if inspect.iscoroutinefunction(fn):

        async def call_async(args: dict[str, Any]) -> Any:
            result: Awaitable[Any] = call(args)
            return await result

        handler = call_async
    # Not functools.wraps: its __wrapped__ would show the task registry fn's
    # own (reason, args) signature, read there as (args, ctx).
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
        if hasattr(fn, attribute):
            setattr(handler, attribute, getattr(fn, attribute))
    return handler
