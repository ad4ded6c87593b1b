"""Retry policies and the worker's outcome decisions: pure logic, pinned random source.

No database and no sleeping: backoff delays are computed with an injected
``rand``, and outcomes are built from a claimed-job value.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

import queue_engine
from queue_engine.cli.tasks import retry_text
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.context import ClaimedJob
from queue_engine.producer.retry import (
    DEFAULT_RETRY,
    ExponentialBackoff,
    FixedBackoff,
    LinearBackoff,
    Permanent,
    Snooze,
    StepBackoff,
    policy_data,
)
from queue_engine.worker import outcomes as oc
from queue_engine.worker.executor import JobCanceled


def job(attempt: int = 1, max_attempts: int = 5) -> ClaimedJob:
    return ClaimedJob(
        id=7,
        queue="q",
        task="t",
        args={},
        attempt=attempt,
        max_attempts=max_attempts,
        priority=100,
        lock_key=None,
        lease_ttl_s=None,
        timeout_s=None,
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


# -- backoff math ---------------------------------------------------------------


@pytest.mark.parametrize(("attempt", "expected"), [(1, 1.0), (2, 2.0), (3, 4.0), (10, 512.0)])
def test_exponential_backoff_doubles_without_jitter(attempt: int, expected: float) -> None:
    policy = ExponentialBackoff(base_s=1.0, factor=2.0, max_s=3600.0, jitter=0.0)
    assert policy.delay(attempt, rand=lambda: 0.99) == expected


def test_exponential_backoff_is_capped_even_for_huge_attempts() -> None:
    policy = ExponentialBackoff(base_s=1.0, factor=2.0, max_s=60.0, jitter=0.0)
    assert policy.delay(7) == 60.0
    assert policy.delay(1000) == 60.0  # no float overflow


def test_jitter_bounds_follow_the_random_source() -> None:
    policy = ExponentialBackoff(base_s=10.0, factor=1.0, max_s=10.0, jitter=0.1)
    assert policy.delay(1, rand=lambda: 0.0) == pytest.approx(9.0)
    assert policy.delay(1, rand=lambda: 0.5) == pytest.approx(10.0)
    assert policy.delay(1, rand=lambda: 1.0) == pytest.approx(11.0)


def test_default_policy_is_one_second_then_doubling_with_ten_percent_jitter() -> None:
    assert DEFAULT_RETRY.delay(1, rand=lambda: 0.5) == pytest.approx(1.0)
    assert DEFAULT_RETRY.delay(4, rand=lambda: 0.5) == pytest.approx(8.0)
    assert DEFAULT_RETRY.delay(4, rand=lambda: 1.0) == pytest.approx(8.8)


def test_fixed_backoff_and_validation() -> None:
    assert FixedBackoff(2.5).delay(9) == 2.5
    with pytest.raises(ValidationError):
        FixedBackoff(-1)
    with pytest.raises(ValidationError):
        ExponentialBackoff(jitter=1.5)
    with pytest.raises(ValidationError):
        Snooze(math.inf)


#: pqrun's BackoffPolicy: 1 min, 5 min, 30 min, 2 h, then 6 h for every later attempt.
PQRUN_STEPS = (60, 300, 1800, 7200, 21600)


@pytest.mark.parametrize(
    ("attempt", "expected"),
    [(1, 60.0), (2, 300.0), (3, 1800.0), (4, 7200.0), (5, 21600.0), (6, 21600.0), (99, 21600.0)],
)
def test_step_backoff_reads_the_list_and_repeats_the_last_step(
    attempt: int, expected: float
) -> None:
    policy = StepBackoff(PQRUN_STEPS)
    assert policy.delay(attempt, rand=lambda: 0.99) == expected


def test_step_backoff_jitter_is_optional_and_follows_the_random_source() -> None:
    policy = StepBackoff([100, 200], jitter=0.2)
    assert policy.delay(2, rand=lambda: 0.0) == pytest.approx(160.0)
    assert policy.delay(2, rand=lambda: 1.0) == pytest.approx(240.0)
    # Without jitter the random source is never asked.
    assert StepBackoff([5]).delay(1, rand=lambda: pytest.fail("rand called")) == 5.0


def test_step_backoff_keeps_its_steps_and_compares_by_them() -> None:
    policy = StepBackoff(iter(PQRUN_STEPS))
    assert policy.steps_s == (60.0, 300.0, 1800.0, 7200.0, 21600.0)
    assert policy == StepBackoff(list(PQRUN_STEPS))
    assert json.loads(json.dumps(policy_data(policy))) == {
        "kind": "stepped",
        "steps_s": [60.0, 300.0, 1800.0, 7200.0, 21600.0],
        "jitter": 0.0,
    }


@pytest.mark.parametrize(
    "bad",
    [
        dict(steps_s=[]),
        dict(steps_s=[1, -1]),
        dict(steps_s=[math.nan]),
        dict(steps_s=["soon"]),
        dict(steps_s=60),
        dict(steps_s=[1], jitter=1.0),
    ],
)
def test_step_backoff_refuses_bad_steps(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="StepBackoff needs"):
        StepBackoff(**bad)


@pytest.mark.parametrize(("attempt", "expected"), [(1, 30.0), (2, 60.0), (3, 90.0), (10, 300.0)])
def test_linear_backoff_is_dataloaders_thirty_seconds_times_the_attempt(
    attempt: int, expected: float
) -> None:
    assert LinearBackoff(30).delay(attempt, rand=lambda: 0.99) == expected


def test_linear_backoff_cap_and_jitter() -> None:
    policy = LinearBackoff(30, max_s=100, jitter=0.1)
    assert policy.delay(2, rand=lambda: 0.5) == pytest.approx(60.0)
    assert policy.delay(9, rand=lambda: 1.0) == pytest.approx(110.0)
    assert policy_data(LinearBackoff(30)) == {
        "kind": "linear",
        "step_s": 30.0,
        "max_s": None,
        "jitter": 0.0,
    }
    for bad in (dict(step_s=-1), dict(max_s=math.inf), dict(jitter=-0.1)):
        with pytest.raises(ValidationError, match="LinearBackoff needs"):
            LinearBackoff(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "shown"),
    [
        (StepBackoff(PQRUN_STEPS), "steps 1m,5m,30m,2h,6h"),
        (StepBackoff([1.5, 90], jitter=0.1), "steps 1.5s,1m30s jitter 10%"),
        (LinearBackoff(30), "linear 30s x attempt"),
        (LinearBackoff(30, max_s=600, jitter=0.2), "linear 30s x attempt max 10m jitter 20%"),
    ],
)
def test_queue_ctl_tasks_shows_the_new_policies_short(policy: object, shown: str) -> None:
    assert retry_text(policy_data(policy)) == shown


def test_the_new_policies_are_public_and_accepted_by_task() -> None:
    assert queue_engine.StepBackoff is StepBackoff
    assert queue_engine.LinearBackoff is LinearBackoff
    policy = StepBackoff(PQRUN_STEPS)

    @queue_engine.task("retry.stepped", retry=policy)
    def handler(args: dict[str, Any]) -> None:
        return None

    definition = queue_engine.registry.get("retry.stepped")
    assert definition is not None
    assert definition.retry is policy


# -- outcomes ---------------------------------------------------------------------


def test_success_stores_json_result_and_duration() -> None:
    out = oc.succeeded(job(), {"rows": 3}, 12, progress='{"p": 1}')
    assert (out.status, out.kind, out.duration_ms, out.progress) == (
        "succeeded",
        "succeeded",
        12,
        '{"p": 1}',
    )
    assert out.result is not None and json.loads(out.result) == {"rows": 3}
    assert oc.succeeded(job(), None, 1).result is None


@pytest.mark.parametrize("bad", [{"x": object()}, float("nan"), {1, 2}])
def test_non_json_result_fails_at_once(bad: object) -> None:
    out = oc.succeeded(job(attempt=1, max_attempts=5), bad, 3)
    assert out.status == "failed" and out.kind == "failed"
    assert out.error is not None and "not JSON-serialisable" in out.error


def test_exception_schedules_a_retry_with_the_policy_delay() -> None:
    policy = ExponentialBackoff(base_s=2.0, factor=3.0, max_s=100.0, jitter=0.5)
    out = oc.from_exception(job(attempt=2), RuntimeError("boom"), 5, retry=policy, rand=lambda: 0.0)
    assert (out.status, out.kind, out.refund) == ("queued", "retry_scheduled", 0)
    assert out.delay_s == pytest.approx(6.0 * 0.5)
    assert out.message is not None and out.message.startswith("RuntimeError: boom")
    assert out.error is not None and "RuntimeError: boom" in out.error


def test_exception_without_policy_uses_the_default() -> None:
    out = oc.from_exception(job(attempt=3), ValueError("x"), 1, rand=lambda: 0.5)
    assert out.delay_s == pytest.approx(4.0)


def test_last_attempt_fails() -> None:
    out = oc.from_exception(job(attempt=5, max_attempts=5), RuntimeError("boom"), 1)
    assert (out.status, out.kind) == ("failed", "failed")
    assert out.message is not None and "no attempts left" in out.message


def test_permanent_fails_even_with_attempts_left() -> None:
    out = oc.from_exception(job(attempt=1, max_attempts=5), Permanent("bad input"), 1)
    assert (out.status, out.kind) == ("failed", "failed")
    assert out.message == "Permanent: bad input"


def test_snooze_requeues_and_refunds_the_attempt() -> None:
    out = oc.from_exception(job(attempt=5, max_attempts=5), Snooze(30), 1)
    assert (out.status, out.kind, out.delay_s, out.refund) == ("queued", "snoozed", 30.0, 1)
    assert out.error is None


def test_cancel_ends_canceled() -> None:
    out = oc.from_exception(job(), JobCanceled(), 4)
    assert (out.status, out.kind) == ("canceled", "canceled")


def test_unknown_task_names_the_registered_tasks() -> None:
    out = oc.unknown_task(job(), ["a.one", "b.two"])
    assert out.status == "failed"
    assert out.error is not None and "'t'" in out.error and "a.one, b.two" in out.error


def test_released_job_goes_back_at_once_without_spending_an_attempt() -> None:
    out = oc.released(job(attempt=2))
    assert (out.status, out.kind, out.delay_s, out.refund) == ("queued", "released", 0.0, 1)


def test_traceback_is_capped_keeping_the_tail() -> None:
    text = "head\n" + "x" * 20_000 + "\nValueError: the end"
    capped = oc.cap_error(text)
    assert len(capped.encode()) <= oc.MAX_ERROR_BYTES
    assert capped.endswith("ValueError: the end")
    assert capped.startswith(oc.TRUNCATED_MARK)
    assert oc.cap_error("short") == "short"


def test_cap_never_splits_a_multibyte_character() -> None:
    capped = oc.cap_error("é" * 10_000, limit=101)
    assert len(capped.encode()) <= 101
    capped.encode("utf-8")  # valid text


def test_a_broken_policy_falls_back_to_a_sane_delay() -> None:
    class Raising:
        def delay(self, attempt: int, rand: object = None) -> float:
            raise ZeroDivisionError

    class Infinite:
        def delay(self, attempt: int, rand: object = None) -> float:
            return math.inf

    assert oc.retry_delay(Raising(), 1, rand=lambda: 0.5) == pytest.approx(1.0)
    assert oc.retry_delay(Infinite(), 1) == oc.MAX_RETRY_DELAY_S
    assert oc.retry_delay(FixedBackoff(0), 1) == 0.0


def test_outcomes_encode_as_one_json_array_whatever_the_text() -> None:
    from queue_engine.worker.store import outcomes_json

    nasty = 'quote " backslash \\ newline \n unicode é \u2028 tab \t'
    items = [
        oc.succeeded(job(), {"k": nasty}, 3, progress='{"p": 1}'),
        oc.from_exception(job(attempt=2), RuntimeError(nasty), 4, rand=lambda: 0.5),
        oc.from_exception(job(), Snooze(1e-5), 0),
    ]
    decoded = json.loads(outcomes_json(items))
    assert decoded[0]["result"] == {"k": nasty} and decoded[0]["progress"] == {"p": 1}
    assert nasty in decoded[1]["error"] and decoded[1]["delay_s"] == pytest.approx(2.0)
    assert decoded[2]["refund"] == 1 and decoded[2]["delay_s"] == pytest.approx(1e-5)
    assert json.loads(outcomes_json([])) == []


def test_nul_characters_never_reach_the_database() -> None:
    out = oc.succeeded(job(), {"k": "a\x00b"}, 1)
    assert out.status == "failed" and out.error is not None and "NUL" in out.error
    failed = oc.from_exception(job(), RuntimeError("bad \x00 byte"), 1, rand=lambda: 0.5)
    assert failed.error is not None and "\x00" not in failed.error
    assert failed.message is not None and "\x00" not in failed.message
