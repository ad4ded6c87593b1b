"""The task defaults the database filled for a producer's plain enqueue, kept for a second.

A producer that does not declare a task (it never imported the app) leaves
the task's defaults to the database: its first ``enqueue(task, queue=...,
args=...)`` sends ``enqueue_plain_defaults.sql``, which looks the task up in
``task_defaults`` and answers the values it applied (migration 0028). The
lookup and the longer answer cost about a tenth more of a single enqueue's
work (server and client instructions, counted by valgrind). The answer is
kept here, per client, for :data:`KEEP_S`; the calls in between send the
values as given, through ``enqueue_plain.sql``, which looks nothing up: the
usual single enqueue costs what it did before.

The price is that a new publication (a worker of a new version started)
reaches a producer within :data:`KEEP_S`, not at once: as if the producer had
enqueued that much earlier. Only the task-queue-args call is kept (the
usual one); any other option, a key, a bulk call, looks up every time.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from queue_engine.producer.tasks import registry
from queue_engine.producer.validation import JobSpec, encode_args

#: How long an answer is kept, in seconds.
KEEP_S = 1.0
#: More (task, queue) pairs than this in one client and it starts over.
KEEP_MAX = 1024


class KeptDefaults:
    """Per client: (task, queue) -> the spec with the task's defaults as the database filled them."""

    def __init__(self, *, keep_s: float = KEEP_S, clock: Callable[[], float] = time.monotonic):
        self.keep_s = keep_s
        self._clock = clock
        self._entries: dict[tuple[str, Any], tuple[float, JobSpec, dict[str, Any]]] = {}

    def spec(self, task: str, queue: Any, args: Any) -> tuple[JobSpec, dict[str, Any]] | None:
        """The spec and ``enqueue_plain`` parameters of this call, filled; None if not kept (any more).

        Not kept once :data:`KEEP_S` has passed, or when the task has been
        registered in this process since (its declaration applies then).
        """
        try:
            entry = self._entries.get((task, queue))
        except TypeError:  # an unhashable queue: never kept, refused by the full validation
            return None
        if entry is None:
            return None
        kept_at, spec, params = entry
        if self._clock() - kept_at >= self.keep_s or registry.get(task) is not None:
            self._entries.pop((task, queue), None)
            return None
        if args is None or args == {}:
            return spec, params
        args_json = encode_args(args)
        return spec.with_args_json(args_json), {**params, "args": args_json}

    def keep(self, sent: JobSpec, row: Sequence[Any]) -> None:
        """Keep what ``enqueue_plain_defaults`` answered (``row``) to the call that sent ``sent``."""
        _id, _available_at, _created_at, queue, priority, max_attempts, timeout_s, lease = row
        filled = dataclasses.replace(
            sent,
            args_json="{}",
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout_s=timeout_s,
            lease_ttl_s=lease,
            defaults_of=None,
        )
        if len(self._entries) >= KEEP_MAX:
            self._entries.clear()
        # The key is the call's (task, queue): sent.queue is the caller's queue, or None.
        self._entries[(sent.task, sent.queue)] = (self._clock(), filled, filled.params())
