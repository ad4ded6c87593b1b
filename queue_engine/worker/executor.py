"""Run a handler of any kind, stopping at checkpoints when the job is canceled.

Plain functions, coroutines, generators and async generators are accepted; the
kind is read from what the call returns (so a decorated handler that hides its
kind still works). Each value a generator yields is a checkpoint: it is handed
to ``checkpoints.checkpoint(value)``, which records dict progress and answers
whether the job must stop. Pure apart from the handler itself: tests drive it
with a fake checkpoint object.
"""

from __future__ import annotations

import asyncio
import inspect
import types
from collections.abc import AsyncGenerator, Generator
from typing import Any, Protocol

from queue_engine.producer.context import JobCanceled
from queue_engine.producer.tasks import TaskDefinition

__all__ = ["Checkpoints", "Executor", "JobCanceled"]

#: What a handler call returns that the executor must drive (``inspect``'s tests below).
_DRIVEN = (types.GeneratorType, types.AsyncGeneratorType, types.CoroutineType)


class Checkpoints(Protocol):
    """Where a running handler reports each ``yield``."""

    def checkpoint(self, value: object = None) -> bool:
        """Record the yielded value; return True when the job must stop now."""
        ...


class Executor:
    """Runs handlers one at a time; owns one event loop for coroutine handlers.

    A per-worker loop instead of ``asyncio.run`` per job saves creating and
    tearing down a loop for every job. The loop is made lazily, so a worker
    with only synchronous handlers never creates one.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self, definition: TaskDefinition, args: dict[str, Any], ctx: Checkpoints) -> Any:
        """Call the handler with ``(args)`` or ``(args, ctx)`` and return its result.

        Raises what the handler raises, or :class:`JobCanceled` when a
        checkpoint reports a cancel.
        """
        returned = (
            definition.handler(args, ctx) if definition.wants_context else definition.handler(args)
        )
        # Most handlers return a plain value: one type check, not three.
        if not isinstance(returned, _DRIVEN):
            return returned
        if inspect.isgenerator(returned):
            return self._drive_generator(returned, ctx)
        if inspect.isasyncgen(returned):
            return self._event_loop().run_until_complete(self._drive_async_generator(returned, ctx))
        if inspect.iscoroutine(returned):
            return self._event_loop().run_until_complete(returned)
        return returned

    def close(self) -> None:
        """Close the event loop, if one was made."""
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop

    @staticmethod
    def _drive_generator(gen: Generator[Any, Any, Any], ctx: Checkpoints) -> Any:
        try:
            value = next(gen)
            while True:
                if ctx.checkpoint(value):
                    gen.close()
                    raise JobCanceled()
                value = gen.send(None)
        except StopIteration as stop:
            return stop.value

    @staticmethod
    async def _drive_async_generator(agen: AsyncGenerator[Any, Any], ctx: Checkpoints) -> None:
        # An async generator cannot return a value: its result is always None.
        try:
            async for value in agen:
                if ctx.checkpoint(value):
                    raise JobCanceled()
        finally:
            await agen.aclose()
