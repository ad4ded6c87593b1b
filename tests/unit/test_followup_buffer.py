"""The follow-up buffer (``ctx.enqueue``) and the finish statement's variants, without a database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.foundation.sql.compiler import raw_statement
from queue_engine.producer.context import ClaimedJob
from queue_engine.producer.followups import MAX_FOLLOWUP_BYTES, MAX_FOLLOWUPS, FollowUpBuffer
from queue_engine.producer.validation import MAX_DELAY_S, build_spec
from queue_engine.worker import outcomes as oc
from queue_engine.worker.store import followups_json, outcomes_json

JOB = ClaimedJob(
    id=42,
    queue="q",
    task="t",
    args={},
    attempt=2,
    max_attempts=5,
    priority=100,
    lock_key=None,
    lease_ttl_s=None,
    timeout_s=None,
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
)


def test_a_followup_is_encoded_with_its_parent_its_place_and_every_option() -> None:
    buffer = FollowUpBuffer(42, 2)
    run_at = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)
    buffer.add("a", {"args": {"x": [1, "é"]}, "run_at": run_at, "lock_key": "k"})
    buffer.add_many([{"task": "b", "producer": "me", "delay": 1.5}])
    first, second = (json.loads(text) for text in buffer.encoded())
    assert first["args"] == {"x": [1, "é"]} and first["run_at"] == run_at.isoformat()
    assert (first["parent_id"], first["parent_attempt"], first["seq"]) == (42, 2, 0)
    assert (first["lock_key"], first["producer"], first["queue"]) == ("k", "job:42", None)
    # Not declared in this process: the finish statement fills queue, priority,
    # max_attempts, timeout and lease from the task's defaults in the database.
    assert first["defaults_of"] == "a"
    assert (second["seq"], second["producer"], second["delay_s"]) == (1, "me", 1.5)
    assert len(buffer) == 2


def test_a_bad_bulk_item_buffers_none_of_the_items() -> None:
    buffer = FollowUpBuffer(1, 1)
    with pytest.raises(ValidationError, match=r"jobs\[1\]: priority must be between"):
        buffer.add_many([{"task": "a"}, {"task": "a", "priority": -1}])
    assert len(buffer) == 0


def test_the_count_cap_raises_with_a_way_out_and_keeps_what_was_buffered() -> None:
    buffer = FollowUpBuffer(1, 1)
    buffer.add_many([{"task": "a"}] * MAX_FOLLOWUPS)
    with pytest.raises(ValidationError, match=r"at most 1000 follow-ups.*enqueue_many"):
        buffer.add("a", {})
    assert len(buffer) == MAX_FOLLOWUPS


def test_the_byte_cap_raises() -> None:
    buffer = FollowUpBuffer(1, 1)
    big = {"blob": "x" * (MAX_FOLLOWUP_BYTES // 20)}
    with pytest.raises(ValidationError, match="follow-ups may take at most"):
        buffer.add_many([{"task": "a", "args": big}] * 21)
    assert len(buffer) == 0


def test_only_a_success_carries_followups() -> None:
    buffer = FollowUpBuffer(JOB.id, JOB.attempt)
    buffer.add("a", {})
    ok = oc.succeeded(JOB, {"r": 1}, 5, followups=buffer.encoded())
    assert ok.followups == buffer.encoded()
    not_json = oc.succeeded(JOB, {1, 2}, 5, followups=buffer.encoded())
    assert not_json.status == "failed" and not_json.followups == ()
    refused = oc.storage_failure(ok, ValueError("nope"))
    assert refused.followups == ()
    assert "(succeeded, with 1 follow-up(s), none of them enqueued)" in (refused.message or "")


def test_the_outcomes_parameter_is_unchanged_and_followups_go_apart() -> None:
    plain = oc.succeeded(JOB, None, 1)
    buffer = FollowUpBuffer(JOB.id, JOB.attempt)
    buffer.add("a", {})
    carrying = oc.succeeded(JOB, None, 1, followups=buffer.encoded())
    assert outcomes_json([carrying]) == outcomes_json([plain])  # no per-job cost
    assert followups_json([plain]) is None
    assert json.loads(followups_json([plain, carrying]) or "") == [json.loads(buffer.encoded()[0])]


@pytest.mark.parametrize("claim", ["cold", "warm"])
def test_only_the_followups_variant_mentions_followups(claim: str) -> None:
    plain = raw_statement("finish_and_claim_jobs", "queue_engine", claim)
    chained = raw_statement("finish_and_claim_jobs", "queue_engine", (claim, "followups"))
    assert "followups" not in plain.names and "followup" not in plain.text
    assert "followups" in chained.names and 'INSERT INTO "queue_engine".jobs' in chained.text


@pytest.mark.parametrize("delay", [1e13, 1e300, timedelta(days=10**8)])
def test_a_delay_postgres_cannot_add_to_now_is_refused_at_the_call(
    delay: float | timedelta,
) -> None:
    """Not in the finish statement (``interval out of range``), for ctx.enqueue and the client."""
    with pytest.raises(ValidationError, match="delay must be at most 100000000000 seconds"):
        FollowUpBuffer(1, 1).add("a", {"delay": delay})
    with pytest.raises(ValidationError, match="delay must be at most"):
        build_spec("a", delay=delay)
    assert build_spec("a", delay=MAX_DELAY_S).delay_s == MAX_DELAY_S
