"""From what a handler did to how its job finishes: pure decisions, no I/O.

An :class:`Outcome` is one element of the arrays that the finish statement
takes, so many outcomes can be flushed in one statement. The mapping is the
one docs/guides/worker.md ("Outcomes, retries, `Permanent`, `Snooze`") and
docs/internals/state-machine.md describe: a return value succeeds; :class:`~queue_engine.producer.retry.Permanent`
fails at once; :class:`~queue_engine.producer.retry.Snooze` re-queues without spending
an attempt; a cancel ends ``canceled``; any other exception re-queues after the
task's backoff until the attempts are spent, then fails. The random source of
the backoff's jitter is injected so tests pin it.
"""

from __future__ import annotations

import json
import math
import random
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from queue_engine.producer.context import ClaimedJob
from queue_engine.producer.retry import DEFAULT_RETRY, Permanent, Skip, Snooze
from queue_engine.worker.executor import JobCanceled

#: The stored traceback is capped at this many bytes (UTF-8); the tail is kept.
MAX_ERROR_BYTES = 10 * 1024
TRUNCATED_MARK = "[... traceback truncated ...]\n"
MAX_MESSAGE_CHARS = 500
#: ``\u0000`` in JSON text that is an escape (not an escaped backslash followed by "u0000").
_ESCAPED_NUL = re.compile(r"(?:^|[^\\])(?:\\\\)*\\u0000")
#: A retry is never scheduled further out than this (a broken policy cannot park a job forever).
MAX_RETRY_DELAY_S = 366 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt of one job ends: the new status, the event, and what to store."""

    job_id: int
    attempt: int
    status: str
    kind: str
    result: str | None = None
    error: str | None = None
    delay_s: float = 0.0
    refund: int = 0
    duration_ms: int | None = None
    progress: str | None = None
    message: str | None = None
    #: Follow-up jobs (JSON objects, :mod:`queue_engine.producer.followups`) to insert
    #: with this outcome; only a success carries any.
    followups: tuple[str, ...] = ()
    #: The workflow the job is a node of: its success may hand a child over to
    #: this worker in the finish statement (the ``handover`` variant,
    #: worker/store.py; whether to try: worker/handover.py).
    workflow_id: int | None = None
    #: For a workflow node, the key it shares with its siblings (its parents'
    #: names, worker/handover.py): whether its success tries the hand-over.
    siblings: str = ""
    #: The job was handed over by its last parent's finish: it is likely a
    #: link of a chain, whose own success may be sent with the ``solo``
    #: variant (worker/store.py, :func:`~queue_engine.worker.store.solo_handover`).
    handed_over: bool = False

    @property
    def event(self) -> str:
        """The log event name, e.g. ``job.succeeded``."""
        return f"job.{self.kind}"


#: A node with more parents than this is keyed by their count, not their names.
NAMED_PARENTS = 8


def siblings_key(parents: Mapping[str, Any] | None) -> str:
    """What a workflow node shares with its siblings: its parents' names (their count, when many).

    The hand-over policy (worker/handover.py) learns per workflow and key:
    a fan's parts share one, each link of a chain has its own.
    """
    if not parents:
        return ""
    if len(parents) > NAMED_PARENTS:
        return f"#{len(parents)}"
    return "\x1f".join(sorted(parents))


def cap_error(text: str, limit: int = MAX_ERROR_BYTES) -> str:
    """Return ``text`` if it fits in ``limit`` UTF-8 bytes, else its tail behind a mark.

    The tail is kept because the end of a traceback (the exception and the
    innermost frames) is the part that explains the failure.
    """
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= limit:
        return text
    keep = limit - len(TRUNCATED_MARK.encode())
    return TRUNCATED_MARK + raw[-keep:].decode("utf-8", errors="ignore")


def encode_json(value: Any) -> str:
    """JSON text that Postgres ``jsonb`` accepts: no NaN/Infinity, no NUL character."""
    encoded = json.dumps(value, allow_nan=False)
    if "\\u0000" in encoded and _ESCAPED_NUL.search(encoded):
        raise ValueError("it contains a NUL character (\\u0000), which jsonb cannot store")
    return encoded


def clean_text(text: str) -> str:
    """Text Postgres accepts: NUL characters (which ``text`` cannot hold) made visible."""
    return text.replace("\x00", "\\x00")


def storage_failure(outcome: Outcome, error: BaseException) -> Outcome:
    """Replace an outcome the database refused to store by a failure that says why."""
    what = outcome.kind
    if outcome.followups:
        what += f", with {len(outcome.followups)} follow-up(s), none of them enqueued"
    message = clean_text(f"the job's outcome ({what}) could not be stored: {describe(error)}")
    return Outcome(
        outcome.job_id,
        outcome.attempt,
        "failed",
        "failed",
        error=message,
        duration_ms=outcome.duration_ms,
        message=message[:MAX_MESSAGE_CHARS],
    )


def describe(exc: BaseException) -> str:
    """One line naming the exception, for events and logs."""
    text = str(exc).strip().splitlines()
    line = f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
    return clean_text(line[:MAX_MESSAGE_CHARS])


def format_traceback(exc: BaseException) -> str:
    """The exception's traceback as stored in ``jobs.error`` (capped)."""
    return cap_error(clean_text("".join(traceback.format_exception(exc))))


def succeeded(
    job: ClaimedJob,
    result: Any,
    duration_ms: int,
    progress: str | None = None,
    followups: tuple[str, ...] = (),
) -> Outcome:
    """The outcome of a handler that returned ``result``; a result that is not JSON fails the job.

    A result that cannot be stored would fail the same way on every attempt, so
    it fails at once rather than being retried (and its ``followups`` are
    dropped with the success they depended on).
    """
    if result is None:
        encoded = None
    elif isinstance(result, Skip):
        return skipped(job, result, duration_ms, progress)
    else:
        try:
            encoded = encode_json(result)
        except (TypeError, ValueError) as exc:
            message = (
                f"handler returned a result that is not JSON-serialisable "
                f"({type(result).__name__}): {exc}"
            )[:MAX_MESSAGE_CHARS]
            return Outcome(
                job.id,
                job.attempt,
                "failed",
                "failed",
                error=message,
                duration_ms=duration_ms,
                progress=progress,
                message=message,
            )
    return Outcome(
        job.id,
        job.attempt,
        "succeeded",
        "succeeded",
        result=encoded,
        duration_ms=duration_ms,
        progress=progress,
        followups=followups,
        workflow_id=job.workflow_id,
        siblings=siblings_key(job.parents),
        handed_over=job.handed_over,
    )


class HandlerExited(Exception):
    """A handler called ``sys.exit()``: recorded as the attempt's error, the worker goes on."""

    def __init__(self, exit_: SystemExit) -> None:
        super().__init__(f"the handler called sys.exit({exit_.code!r}); the worker kept running")


def skipped(job: ClaimedJob, skip: Skip, duration_ms: int, progress: str | None = None) -> Outcome:
    """The handler raised or returned :class:`Skip`: final, the reason kept as the result."""
    reason = clean_text(skip.reason)[:MAX_MESSAGE_CHARS]
    return Outcome(
        job.id,
        job.attempt,
        "skipped",
        "skipped",
        result=encode_json({"skipped": reason}),
        duration_ms=duration_ms,
        progress=progress,
        message=reason,
    )


def bad_reference(job: ClaimedJob, problem: str) -> Outcome:
    """An expression in a node's args (or its ``skip_if``) could not be resolved: fail, no retry."""
    message = f"bad reference in args: {problem}"[:MAX_MESSAGE_CHARS]
    return Outcome(
        job.id, job.attempt, "failed", "failed", error=message, duration_ms=0, message=message
    )


def from_exception(
    job: ClaimedJob,
    exc: BaseException,
    duration_ms: int,
    *,
    retry: Any = None,
    progress: str | None = None,
    rand: Callable[[], float] = random.random,
    error_text: str | None = None,
) -> Outcome:
    """The outcome of a handler that raised ``exc`` on attempt ``job.attempt``."""
    common: dict[str, Any] = {"duration_ms": duration_ms, "progress": progress}
    if isinstance(exc, JobCanceled):
        return Outcome(job.id, job.attempt, "canceled", "canceled", message=str(exc), **common)
    if isinstance(exc, Skip):
        return skipped(job, exc, duration_ms, progress)
    if isinstance(exc, Snooze):
        return Outcome(
            job.id,
            job.attempt,
            "queued",
            "snoozed",
            delay_s=exc.seconds,
            refund=1,
            message=f"snoozed for {exc.seconds:g}s (attempt not counted)",
            **common,
        )
    error = error_text if error_text is not None else format_traceback(exc)
    message = describe(exc)
    if isinstance(exc, Permanent):
        return Outcome(
            job.id, job.attempt, "failed", "failed", error=error, message=message, **common
        )
    if job.attempt >= job.max_attempts:
        return Outcome(
            job.id,
            job.attempt,
            "failed",
            "failed",
            error=error,
            message=f"{message} (attempt {job.attempt} of {job.max_attempts}, no attempts left)",
            **common,
        )
    delay = retry_delay(retry, job.attempt, rand)
    return Outcome(
        job.id,
        job.attempt,
        "queued",
        "retry_scheduled",
        error=error,
        delay_s=delay,
        message=f"{message} (attempt {job.attempt} of {job.max_attempts}, retry in {delay:.3g}s)",
        **common,
    )


def retry_delay(retry: Any, attempt: int, rand: Callable[[], float] = random.random) -> float:
    """The policy's delay after ``attempt``, kept finite and in [0, MAX_RETRY_DELAY_S].

    A custom policy that raises or returns nonsense must not stop the worker
    from recording the failure: the default policy is used instead.
    """
    policy = retry if retry is not None else DEFAULT_RETRY
    try:
        delay = float(policy.delay(attempt, rand=rand))
    except Exception:
        delay = float(DEFAULT_RETRY.delay(attempt, rand=rand))
    if not math.isfinite(delay):
        delay = MAX_RETRY_DELAY_S
    return min(max(0.0, delay), MAX_RETRY_DELAY_S)


def unknown_task(job: ClaimedJob, registered: list[str]) -> Outcome:
    """A job whose task this worker does not know: fail at once, naming the known tasks."""
    names = ", ".join(registered) if registered else "(none)"
    message = (
        f"unknown task {job.task!r}: this worker's app registers {names}; "
        "check the task name or the worker's --app"
    )[:2000]
    return Outcome(job.id, job.attempt, "failed", "failed", error=message, message=message)


def released(job: ClaimedJob) -> Outcome:
    """Give back a prefetched job that never started: queued again at once, attempt not counted."""
    return Outcome(
        job.id,
        job.attempt,
        "queued",
        "released",
        refund=1,
        message="prefetched job given back unstarted (worker stopping)",
    )


def canceled_before_start(job: ClaimedJob) -> Outcome:
    """A job whose cancel was requested before its handler started: canceled, never run."""
    return Outcome(
        job.id, job.attempt, "canceled", "canceled", message="canceled before it started"
    )


class WatchdogTripped(Exception):
    """The job's wall-clock budget or stall timeout ran out (the message says which)."""


def given_back(job: ClaimedJob, duration_ms: int, *, progress: str | None, message: str) -> Outcome:
    """A running job the SIGTERM grace ran out on: queued again at once, attempt not counted."""
    return Outcome(
        job.id,
        job.attempt,
        "queued",
        "given_back",
        refund=1,
        duration_ms=duration_ms,
        progress=progress,
        message=message,
    )


def hard_canceled(
    job: ClaimedJob, duration_ms: int, *, progress: str | None, message: str
) -> Outcome:
    """A job that ignored its cancel for the grace period: canceled by the watchdog."""
    return Outcome(
        job.id,
        job.attempt,
        "canceled",
        "canceled",
        error=message,
        duration_ms=duration_ms,
        progress=progress,
        message=message,
    )


def watchdog_failure(
    job: ClaimedJob,
    duration_ms: int,
    *,
    message: str,
    retry: Any = None,
    progress: str | None = None,
) -> Outcome:
    """A budget or stall trip: a failure like any exception (retried while attempts remain)."""
    return from_exception(
        job,
        WatchdogTripped(message),
        duration_ms,
        retry=retry,
        progress=progress,
        error_text=message,
    )
