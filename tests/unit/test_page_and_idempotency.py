"""The core pieces the HTTP API shares with every client: keyset pages and idempotent re-sends."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer import operations as ops
from queue_engine.producer.jobs import Job, JobStatus

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def job(**changes: object) -> Job:
    base = Job(
        id=7,
        queue="q",
        task="t",
        args={"a": 1},
        status=JobStatus.QUEUED,
        priority=100,
        available_at=NOW,
        attempt=0,
        max_attempts=5,
        lease_ttl_s=None,
        lease_expires_at=None,
        heartbeat_at=None,
        claimed_by=None,
        timeout_s=None,
        idempotency_key="k",
        dedupe_key=None,
        lock_key=None,
        partition_key=None,
        producer=None,
        cancel_requested=False,
        progress=None,
        result=None,
        error=None,
        created_at=NOW,
        started_at=None,
        finished_at=None,
        duration_ms=None,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_resend_with_the_same_options_matches_whatever_the_status() -> None:
    spec = ops.job_spec("t", queue="q", args={"a": 1}, idempotency_key="k")
    assert ops.idempotency_mismatch(job(), spec) == []
    assert ops.idempotency_mismatch(job(status=JobStatus.SUCCEEDED, attempt=1), spec) == []


def test_a_reused_key_names_every_field_that_differs() -> None:
    spec = ops.job_spec("t", queue="other", args={"a": 2}, priority=5, idempotency_key="k")
    assert ops.idempotency_mismatch(job(), spec) == ["queue", "args", "priority"]


def test_page_statement_binds_filters_and_checks_them() -> None:
    statement = ops.page_statement(
        "queue_engine", statuses=["queued", "failed"], args_contain={"c": 1}, after_id=10, limit=5
    )
    assert statement.params["statuses"] == ["queued", "failed"]
    assert statement.params["args"] == '{"c":1}'  # encoded as a job's args are
    assert (statement.params["after_id"], statement.params["limit"]) == (10, 5)
    code = "\n".join(line for line in statement.query.splitlines() if not line.startswith("--"))
    assert "ORDER BY j.id DESC" in code and "OFFSET" not in code
    for bad, match in (
        ({"statuses": ["done"]}, "unknown status"),
        ({"limit": 0}, "limit"),
        ({"limit": ops.PAGE_LIMIT_MAX + 1}, "limit"),
        ({"after_id": 0}, "positive"),
        ({"queue": "bad name"}, "queue name"),
        ({"created_after": datetime(2026, 1, 1)}, "timezone-aware"),  # noqa: DTZ001
    ):
        with pytest.raises(ValidationError, match=match):
            ops.page_statement("queue_engine", **bad)  # type: ignore[arg-type]
