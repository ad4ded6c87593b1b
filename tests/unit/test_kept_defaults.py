"""The defaults the database filled for a plain enqueue, kept per client for a second.

``KeptDefaults`` answers a later call with the same task and queue from what
``enqueue_plain_defaults`` answered, until ``keep_s`` has passed on its
(injected) clock or the task gets registered in this process; the call's own
``args`` replace the kept ones. Nothing here waits.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from support.timing import FakeTiming

from queue_engine.producer import operations as ops
from queue_engine.producer.kept_defaults import KEEP_MAX, KeptDefaults
from queue_engine.producer.tasks import registry, task

AT = datetime(2030, 1, 1, tzinfo=UTC)
#: What enqueue_plain_defaults answers: id, two times, then the five filled options.
ROW = (1, AT, AT, "email", 7, 3, 30, None)


@pytest.fixture
def clock() -> FakeTiming:
    return FakeTiming(100.0)


def test_a_kept_answer_fills_the_next_call_until_it_expires(clock: FakeTiming) -> None:
    kept = KeptDefaults(keep_s=1.0, clock=clock)
    assert kept.spec("kd.task", None, None) is None
    kept.keep(ops.job_spec("kd.task"), ROW)
    spec, params = kept.spec("kd.task", None, None)  # type: ignore[misc]
    assert (spec.queue, spec.priority, spec.max_attempts, spec.timeout_s, spec.lease_ttl_s) == (
        "email",
        7,
        3,
        30,
        None,
    )
    assert spec.defaults_of is None  # nothing left to fill: enqueue_plain is sent
    assert ops.plain_query_name(spec) == "enqueue_plain"
    assert params == spec.params()
    clock.now += 0.999
    assert kept.spec("kd.task", None, None) is not None
    clock.now += 0.001
    assert kept.spec("kd.task", None, None) is None
    assert kept.spec("kd.task", None, None) is None  # and it is gone


def test_the_calls_args_replace_the_kept_ones(clock: FakeTiming) -> None:
    kept = KeptDefaults(clock=clock)
    kept.keep(
        ops.job_spec("kd.task", queue="q", args={"x": 1}), (1, AT, AT, "q", 100, 5, None, None)
    )
    spec, params = kept.spec("kd.task", "q", {"n": 1})  # type: ignore[misc]
    assert (spec.args_json, params["args"]) == ('{"n":1}', '{"n":1}')
    again, again_params = kept.spec("kd.task", "q", {})  # type: ignore[misc]
    assert (again.args_json, again_params["args"]) == ("{}", "{}")
    # Another queue, or none, is another call.
    assert kept.spec("kd.task", None, None) is None
    assert kept.spec("kd.task", "other", None) is None


def test_a_task_registered_since_is_not_answered_from_the_kept_answer(clock: FakeTiming) -> None:
    kept = KeptDefaults(clock=clock)
    kept.keep(ops.job_spec("kd.registered"), ROW)

    @task("kd.registered", queue="mine")
    def handler(args: dict[str, Any]) -> None:
        return None

    try:
        assert kept.spec("kd.registered", None, None) is None
    finally:
        registry.unregister("kd.registered")


def test_an_unhashable_queue_is_never_kept(clock: FakeTiming) -> None:
    assert KeptDefaults(clock=clock).spec("kd.task", ["q"], None) is None


def test_it_starts_over_past_its_bound(clock: FakeTiming) -> None:
    kept = KeptDefaults(clock=clock)
    for i in range(KEEP_MAX + 1):
        kept.keep(ops.job_spec(f"kd.t{i}"), ROW)
    assert kept.spec("kd.t0", None, None) is None
    assert kept.spec(f"kd.t{KEEP_MAX}", None, None) is not None
