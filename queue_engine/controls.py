"""Per-queue operator controls stored in the ``queues`` table: pause and resume.

A control is a row in the database, not a message to running processes: every
worker reads it in its claim statement (one primary-key lookup per claim), so
it takes effect at each worker's next claim, applies to workers started later,
and survives restarts. Resume also NOTIFYs the queue on ``<schema>.jobs`` in
the same transaction, so idle workers claim at once instead of at their next
poll. Pause needs no notification: a worker that is idle is not claiming.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from queue_engine import sql as queries
from queue_engine.db import schema_errors
from queue_engine.validation import check_queue_name


@dataclass(frozen=True, slots=True)
class PauseResult:
    """What a pause did: since when the queue is paused, and whether it already was."""

    queue: str
    paused_at: datetime
    was_paused: bool


@dataclass(frozen=True, slots=True)
class ResumeResult:
    """What a resume did: whether the queue was paused before."""

    queue: str
    was_paused: bool


def pause_queue(conn: psycopg.Connection[Any], schema: str, queue: str) -> PauseResult:
    """Pause ``queue`` (validated first); idempotent, keeps the first ``paused_at``."""
    check_queue_name(queue)
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("queue_pause", schema), {"queue": queue}).fetchone()
    assert row is not None  # an upsert always returns its row
    return PauseResult(queue, row[0], bool(row[1]))


def resume_queue(conn: psycopg.Connection[Any], schema: str, queue: str) -> ResumeResult:
    """Resume ``queue`` (validated first) and wake its idle workers; idempotent."""
    check_queue_name(queue)
    params = {"queue": queue, "jobs_channel": queries.jobs_channel(schema)}
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("queue_resume", schema), params).fetchone()
    assert row is not None
    return ResumeResult(queue, bool(row[0]))
