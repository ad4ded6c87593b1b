"""Retry policies and the worker's outcome decisions: pure logic, pinned random source.

No database and no sleeping: backoff delays are computed with an injected
``rand``, and outcomes are built from a claimed-job value.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.context import ClaimedJob
from queue_engine.producer.retry import (
    DEFAULT_RETRY,
    ExponentialBackoff,
    FixedBackoff,
    Permanent,
    Snooze,
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
