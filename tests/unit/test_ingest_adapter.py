"""``ingest(fn)``: queue_workflows' ``fn(reason)`` / ``fn(reason, args)`` as an ``(args)`` handler.

The reason comes from the scheduled job's reserved ``_schedule`` key
(``"enqueued"`` without it), the args reach a two-parameter function without
that key, a coroutine stays one, and the task registry reads the wrapper as an
``(args)`` handler; any other signature is refused with one line.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from queue_engine import ingest
from queue_engine.foundation.errors import ValidationError

SCHEDULED = {"day": 1, "_schedule": {"schedule": "s", "slot": None, "reason": "schedule"}}


def test_the_reason_and_the_args_without_the_schedule_key_reach_the_function() -> None:
    def fetch(reason: str, args: dict[str, Any]) -> Any:
        return {"reason": reason, "args": args}

    def tick(reason: str) -> Any:
        return reason

    assert ingest(fetch)(SCHEDULED) == {"reason": "schedule", "args": {"day": 1}}
    assert ingest(fetch)({"day": 2}) == {"reason": "enqueued", "args": {"day": 2}}
    assert ingest(tick)({"_schedule": {"reason": "manual"}}) == "manual"
    assert ingest(tick).__name__ == "tick"


def test_a_coroutine_stays_a_coroutine() -> None:
    async def fetch(reason: str, args: dict[str, Any]) -> Any:
        return [reason, args]

    handler = ingest(fetch)
    assert asyncio.iscoroutinefunction(handler)
    assert asyncio.run(handler(SCHEDULED)) == ["schedule", {"day": 1}]


def test_the_registry_sees_an_args_handler_not_the_functions_own_signature() -> None:
    def fetch(reason: str, args: dict[str, Any]) -> Any:
        return reason

    # Two parameters would read as (args, ctx): the wrapper shows one.
    assert list(inspect.signature(ingest(fetch)).parameters) == ["args"]


@pytest.mark.parametrize("fn", [lambda: None, lambda a, b, c: None])
def test_another_signature_is_refused_in_one_line(fn: Any) -> None:
    with pytest.raises(ValidationError, match=r"must take \(reason\) or \(reason, args\)"):
        ingest(fn)
