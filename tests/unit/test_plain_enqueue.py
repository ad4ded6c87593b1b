"""The usual single enqueue's validated requests, kept per (task, queue), and its Job.

``operations.plain_enqueue`` validates a (task, queue) once and keeps the
spec and its statement parameters; these tests hold it to what the full
validation (``job_spec``) gives for the same call, including the task's
registered defaults when the registration changes, and to the same refusals.
``inserted_job`` builds its Job positionally; a test builds it by keyword.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer import operations as ops
from queue_engine.producer.jobs import Job, JobStatus
from queue_engine.producer.tasks import registry, task


@pytest.mark.parametrize(
    ("name", "queue", "args"),
    [
        ("plain.t", None, None),
        ("plain.t", "q1", {}),
        ("plain.t", "q1", {"a": [1, 2], "b": {"c": None}}),
        ("plain.t", "q2", {"n": 1.5}),
    ],
)
def test_the_kept_request_equals_the_full_validation(
    name: str, queue: str | None, args: dict[str, Any] | None
) -> None:
    for _ in range(2):  # the first call builds the entry, the second reads it
        spec, params = ops.plain_enqueue(name, queue, args)
        expected = ops.job_spec(name, queue=queue, args=args)
        assert spec == expected
        assert params == expected.params()


def test_calls_with_other_args_do_not_share_them() -> None:
    first, first_params = ops.plain_enqueue("plain.args", "q", {"i": 1})
    second, second_params = ops.plain_enqueue("plain.args", "q", {"i": 2})
    empty, empty_params = ops.plain_enqueue("plain.args", "q", {})
    assert (first.args_json, first_params["args"]) == ('{"i":1}', '{"i":1}')
    assert (second.args_json, second_params["args"]) == ('{"i":2}', '{"i":2}')
    assert (empty.args_json, empty_params["args"]) == ("{}", "{}")


def test_registered_defaults_apply_and_a_new_registration_is_seen() -> None:
    assert ops.plain_enqueue("plain.registered", None, None)[0].defaults_of == "plain.registered"

    @task("plain.registered", queue="etl.load", max_attempts=9, timeout_s=600)
    def first(args: dict[str, object]) -> None:
        return None

    spec, params = ops.plain_enqueue("plain.registered", None, None)
    assert (spec.queue, spec.max_attempts, spec.timeout_s) == ("etl.load", 9, 600)
    assert spec.defaults_of is None
    assert (params["queue"], params["max_attempts"], params["timeout_s"]) == ("etl.load", 9, 600)
    registry.unregister("plain.registered")

    @task("plain.registered", queue="etl.other", max_attempts=2)
    def second(args: dict[str, object]) -> None:
        return None

    spec, _ = ops.plain_enqueue("plain.registered", None, None)
    assert (spec.queue, spec.max_attempts, spec.timeout_s) == ("etl.other", 2, None)
    registry.unregister("plain.registered")
    spec, _ = ops.plain_enqueue("plain.registered", None, None)
    assert (spec.queue, spec.defaults_of) == (None, "plain.registered")


@pytest.mark.parametrize(
    ("name", "queue", "args", "message"),
    [
        ("bad task", None, None, "invalid task name 'bad task'"),
        (["a", "list"], None, None, "invalid task name ['a', 'list']"),
        ("t", ["q"], None, "invalid queue name ['q']"),
        ("t", "bad queue", None, "invalid queue name 'bad queue'"),
        ("t", "q", ["not", "a", "dict"], "args must be a dict"),
        ("t", "q", {"x": float("nan")}, "args are not JSON-serialisable"),
    ],
)
def test_refusals_are_the_full_validations(name: Any, queue: Any, args: Any, message: str) -> None:
    for call in (
        lambda: ops.plain_enqueue(name, queue, args),
        lambda: ops.job_spec(name, queue=queue, args=args),
    ):
        with pytest.raises(ValidationError) as info:
            call()
        assert str(info.value).startswith(message)


def test_a_refused_request_is_not_kept() -> None:
    with pytest.raises(ValidationError):
        ops.plain_enqueue("t", "bad queue", None)
    assert ("t", "bad queue") not in ops._PLAIN


def test_the_cache_starts_over_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "PLAIN_CACHE_MAX", 3)
    ops._PLAIN.clear()
    for queue in ("a", "b", "c", "d"):
        ops.plain_enqueue("plain.bound", queue, None)
    assert list(ops._PLAIN) == [("plain.bound", "d")]


def test_inserted_job_is_the_job_built_by_keyword() -> None:
    spec = ops.job_spec(
        "t",
        queue="q",
        args={"a": 1},
        priority=7,
        max_attempts=3,
        timeout_s=60,
        lease_ttl_s=30,
        lock_key="lk",
        partition_key="pk",
        producer="me",
        affinity_key="warm",
    )
    available_at = datetime(2030, 1, 1, tzinfo=UTC)
    created_at = datetime(2029, 12, 31, tzinfo=UTC)
    assert ops.inserted_job(spec, (42, available_at, created_at)) == Job(
        id=42,
        queue="q",
        task="t",
        args={"a": 1},
        status=JobStatus.QUEUED,
        priority=7,
        available_at=available_at,
        attempt=0,
        max_attempts=3,
        lease_ttl_s=30,
        lease_expires_at=None,
        heartbeat_at=None,
        claimed_by=None,
        timeout_s=60,
        idempotency_key=None,
        dedupe_key=None,
        lock_key="lk",
        partition_key="pk",
        producer="me",
        cancel_requested=False,
        progress=None,
        result=None,
        error=None,
        created_at=created_at,
        started_at=None,
        finished_at=None,
        duration_ms=None,
        created=True,
        affinity_key="warm",
        workflow_id=None,
        node=None,
        pending_parents=None,
    )


def test_the_statement_is_chosen_by_what_is_left_to_fill() -> None:
    unset = ops.job_spec("plain.unknown", queue="q")
    assert ops.plain_query_name(unset) == "enqueue_plain_defaults"
    everything = ops.job_spec(
        "plain.unknown", queue="q", priority=1, max_attempts=1, timeout_s=1, lease_ttl_s=1
    )
    assert ops.plain_query_name(everything) == "enqueue_plain"


def test_inserted_job_takes_what_the_database_filled() -> None:
    # enqueue_plain_defaults answers the five options the task's defaults filled.
    spec = ops.job_spec("t", args={"a": 1}, lock_key="lk")
    available_at = datetime(2030, 1, 1, tzinfo=UTC)
    created_at = datetime(2029, 12, 31, tzinfo=UTC)
    job = ops.inserted_job(spec, (42, available_at, created_at, "email", 7, 3, 30, None))
    assert (job.queue, job.priority, job.max_attempts, job.timeout_s, job.lease_ttl_s) == (
        "email",
        7,
        3,
        30,
        None,
    )
    assert (job.id, job.task, job.args, job.lock_key) == (42, "t", {"a": 1}, "lk")


def test_a_batch_looks_up_only_when_some_row_leaves_options_to_the_database() -> None:
    def statement(*items: dict[str, Any]) -> str:
        specs = ops.enqueue_many_specs(items)
        return ops.enqueue_many_statement("queue_engine", specs).query

    given = {"queue": "q", "priority": 1, "max_attempts": 1, "timeout_s": 1, "lease_ttl_s": 1}
    plain = statement({"task": "bulk.a", **given}, {"task": "bulk.b", **given})
    assert plain == ops.queries.query("enqueue_many_plain", "queue_engine")
    assert "task_defaults" not in plain
    mixed = statement({"task": "bulk.a", **given}, {"task": "bulk.b"})
    assert mixed == ops.queries.query("enqueue_many_plain_defaults", "queue_engine")
    assert statement({"task": "bulk.a"}) == mixed
