"""Atomic follow-ups: jobs a handler buffers to be inserted with its success.

``ctx.enqueue(...)`` and ``ctx.enqueue_many([...])`` do not write anything:
they validate the job (the client's own rules, :mod:`queue_engine.producer.validation`,
so a bad option raises in the handler, at the call) and keep it in the job's
:class:`FollowUpBuffer`. When the handler returns, the worker sends the buffer
with the job's outcome, and the finish statement inserts the follow-ups only
for an outcome it applied as ``succeeded`` (``finish_and_claim_jobs.sql``,
variant ``followups``). The follow-ups therefore exist if and only if the
success commits: the transactional outbox pattern, with the jobs table as the
outbox (docs/guides/follow-ups.md).

A buffer is encoded once, here, as JSON objects ready for the statement's
``jsonb_to_recordset``: the worker only joins the texts, and a job without
follow-ups costs nothing (the plain finish statement does not even read them).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer import operations as ops
from queue_engine.producer.validation import EnqueueOptions, JobSpec

#: At most this many follow-ups per job attempt: a fan-out wider than this
#: belongs in ``ctx.client().enqueue_many`` (or a workflow), not in one finish
#: statement that every worker of the queue waits behind.
MAX_FOLLOWUPS = 1000
#: At most this many bytes of encoded follow-ups per job attempt (args
#: included): the buffer travels as one parameter of the finish statement.
MAX_FOLLOWUP_BYTES = 16 * 1024 * 1024


def default_producer(job_id: int) -> str:
    """The producer a follow-up gets when the handler names none: the job that made it."""
    return f"job:{job_id}"


def encode(spec: JobSpec, *, parent_id: int, parent_attempt: int, seq: int) -> str:
    """One follow-up as the JSON object the finish statement reads (args embedded as they are).

    ``seq`` is its place in the parent's buffer: the statement inserts in that order.
    """
    fields = {
        "parent_id": parent_id,
        "parent_attempt": parent_attempt,
        "seq": seq,
        "queue": spec.queue,
        "task": spec.task,
        "priority": spec.priority,
        "run_at": None if spec.run_at is None else spec.run_at.isoformat(),
        "delay_s": spec.delay_s,
        "max_attempts": spec.max_attempts,
        "timeout_s": spec.timeout_s,
        "lease_ttl_s": spec.lease_ttl_s,
        "idempotency_key": spec.idempotency_key,
        "dedupe_key": spec.dedupe_key,
        "lock_key": spec.lock_key,
        "partition_key": spec.partition_key,
        "producer": spec.producer,
        "affinity_key": spec.affinity_key,
        "defaults_of": spec.defaults_of,
        "concurrency_key": spec.concurrency_key,
        "concurrency_limit": spec.concurrency_limit,
        "weight": spec.weight,
    }
    return '{"args":' + spec.args_json + "," + json.dumps(fields, separators=(",", ":"))[1:]


class FollowUpBuffer:
    """The follow-ups one attempt of one job has buffered, already validated and encoded."""

    def __init__(self, job_id: int, attempt: int) -> None:
        self.job_id = job_id
        self.attempt = attempt
        self._items: list[str] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def add(self, task: str, options: EnqueueOptions) -> None:
        """Validate one follow-up (``Client.enqueue``'s options) and buffer it."""
        self._extend([ops.spec_for(task, options)])

    def add_many(self, items: Iterable[Any]) -> None:
        """Validate every item (``Client.enqueue_many``'s dicts) first, then buffer them all.

        A bad item raises and buffers none of them, as ``enqueue_many`` writes none.
        """
        self._extend(ops.enqueue_many_specs(items))

    def encoded(self) -> tuple[str, ...]:
        """The buffered follow-ups as JSON objects, in the order they were buffered."""
        return tuple(self._items)

    def _extend(self, specs: list[JobSpec]) -> None:
        count = len(self._items) + len(specs)
        if count > MAX_FOLLOWUPS:
            raise ValidationError(
                f"a job may buffer at most {MAX_FOLLOWUPS} follow-ups (ctx.enqueue), this one "
                f"would have {count}: enqueue a wide fan-out with ctx.client().enqueue_many "
                "(not atomic with the success) or hand it to one follow-up job that fans out"
            )
        encoded = []
        for seq, spec in enumerate(specs, start=len(self._items)):
            if spec.producer is None:
                spec.producer = default_producer(self.job_id)
            encoded.append(
                encode(spec, parent_id=self.job_id, parent_attempt=self.attempt, seq=seq)
            )
        size = self._bytes + sum(len(text.encode()) for text in encoded)
        if size > MAX_FOLLOWUP_BYTES:
            raise ValidationError(
                f"a job's follow-ups may take at most {MAX_FOLLOWUP_BYTES} bytes as JSON, "
                f"these would take {size}: pass references (ids, paths) in args, not the data"
            )
        self._items.extend(encoded)
        self._bytes = size
