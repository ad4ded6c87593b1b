"""Retry policies and the exceptions a handler raises to steer its job.

A handler's plain exception means "retry after the task's backoff" (or fail
when attempts are spent); :class:`Permanent` fails the job at once;
:class:`Snooze` puts it back for a while without spending an attempt.
Policies are pure functions of the attempt number (and an injectable random
source), so they are unit-tested without waiting.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from queue_engine.foundation.errors import ValidationError


class Permanent(Exception):
    """Raise from a handler to fail the job now, whatever attempts remain."""


class Skip(Exception):
    """Raise (or return) from a handler to end the job ``skipped``: final, not a failure.

    For a workflow node, children treat a skipped parent as their edge says:
    an edge that requires success skips them too, a ``finished`` edge runs
    them (docs/guides/workflows.md).
    """

    def __init__(self, reason: str = "skipped by the handler") -> None:
        super().__init__(reason)
        self.reason = str(reason)


class Snooze(Exception):
    """Raise from a handler to run the job again after ``seconds``, not counted as an attempt."""

    def __init__(self, seconds: float) -> None:
        if not math.isfinite(seconds) or seconds < 0:
            raise ValidationError(f"Snooze seconds must be finite and >= 0, got {seconds!r}")
        super().__init__(f"snoozed for {seconds:g}s")
        self.seconds = float(seconds)


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """``base_s * factor**(attempt-1)``, capped at ``max_s``, times a random ±``jitter`` fraction.

    Jitter spreads the retries of jobs that failed together (say, when a
    downstream service was down) so they do not all come back at once.
    """

    base_s: float = 1.0
    factor: float = 2.0
    max_s: float = 3600.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if (
            self.base_s < 0
            or self.factor < 1
            or self.max_s < self.base_s
            or not 0 <= self.jitter < 1
        ):
            raise ValidationError(
                "ExponentialBackoff needs base_s >= 0, factor >= 1, max_s >= base_s, 0 <= jitter < 1"
            )

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        exponent = max(attempt, 1) - 1
        raw = self.max_s if exponent > 64 else min(self.max_s, self.base_s * self.factor**exponent)
        return _jittered(raw, self.jitter, rand)


@dataclass(frozen=True, slots=True)
class FixedBackoff:
    """The same delay after every failed attempt."""

    seconds: float = 1.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.seconds) or self.seconds < 0:
            raise ValidationError("FixedBackoff seconds must be finite and >= 0")

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after any failed attempt."""
        return self.seconds


@dataclass(frozen=True, slots=True)
class StepBackoff:
    """Delays read from a list by attempt: the n-th failed attempt waits ``steps_s[n-1]``.

    The last step repeats for every later attempt. pqrun's ``BackoffPolicy``
    is ``StepBackoff([60, 300, 1800, 7200, 21600])``: 1 min, 5 min, 30 min,
    2 h, then 6 h. A list says plainly what an operator expects to see on a
    dashboard ("the third retry is in half an hour"), which a formula does not.
    ``jitter`` (0 by default, as pqrun had none) spreads each delay by a random
    ±fraction, like :class:`ExponentialBackoff`'s.
    """

    steps_s: tuple[float, ...]
    jitter: float = 0.0

    def __init__(self, steps_s: Iterable[float], jitter: float = 0.0) -> None:
        try:
            steps = tuple(float(step) for step in steps_s)
        except (TypeError, ValueError):
            steps = ()
        if not steps or not all(math.isfinite(step) and step >= 0 for step in steps):
            raise ValidationError("StepBackoff needs at least one delay, each finite and >= 0")
        _check_jitter("StepBackoff", jitter)
        object.__setattr__(self, "steps_s", steps)
        object.__setattr__(self, "jitter", float(jitter))

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        index = min(max(attempt, 1), len(self.steps_s)) - 1
        return _jittered(self.steps_s[index], self.jitter, rand)


@dataclass(frozen=True, slots=True)
class LinearBackoff:
    """``step_s * attempt``, capped at ``max_s`` (if given): dataloader's ``30 * attempt`` seconds.

    ``LinearBackoff(30)`` waits 30 s after the first failed attempt, 60 s
    after the second, and so on, as dataloader's workers did. ``jitter`` as
    :class:`StepBackoff`'s.
    """

    step_s: float = 30.0
    max_s: float | None = None
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if (
            not math.isfinite(self.step_s)
            or self.step_s < 0
            or (self.max_s is not None and not (math.isfinite(self.max_s) and self.max_s >= 0))
        ):
            raise ValidationError("LinearBackoff needs step_s and max_s finite and >= 0")
        _check_jitter("LinearBackoff", self.jitter)

    def delay(self, attempt: int, rand: Callable[[], float] = random.random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        raw = self.step_s * max(attempt, 1)
        if self.max_s is not None:
            raw = min(raw, self.max_s)
        return _jittered(raw, self.jitter, rand)


def _check_jitter(policy: str, jitter: float) -> None:
    if not 0 <= jitter < 1:
        raise ValidationError(f"{policy} needs 0 <= jitter < 1")


def _jittered(seconds: float, jitter: float, rand: Callable[[], float]) -> float:
    """``seconds`` times a random factor in ``[1 - jitter, 1 + jitter)``, never below 0."""
    if jitter == 0:
        return float(seconds)
    return max(0.0, seconds * (1 + jitter * (2 * rand() - 1)))


#: The policy of a task registered without ``retry=``: 1 s, 2 s, 4 s, ... capped at 1 h, ±10 %.
DEFAULT_RETRY = ExponentialBackoff()


def policy_data(policy: Any) -> dict[str, Any]:
    """A task's retry policy as JSON-able data, as workers publish it (``queue-ctl tasks``).

    Only to be read: the worker that runs a job retries it by the policy of
    its own declaration of the task (it imported the task to run it), so a
    policy stored with the job or the task could only be an older or newer
    copy of the one that applies. ``None`` is :data:`DEFAULT_RETRY`; a policy
    of another class is named, its parameters being its own.
    """
    chosen = DEFAULT_RETRY if policy is None else policy
    if type(chosen) is ExponentialBackoff:
        return {
            "kind": "exponential",
            "base_s": chosen.base_s,
            "factor": chosen.factor,
            "max_s": chosen.max_s,
            "jitter": chosen.jitter,
        }
    if type(chosen) is FixedBackoff:
        return {"kind": "fixed", "seconds": chosen.seconds}
    if type(chosen) is StepBackoff:
        return {"kind": "stepped", "steps_s": list(chosen.steps_s), "jitter": chosen.jitter}
    if type(chosen) is LinearBackoff:
        return {
            "kind": "linear",
            "step_s": chosen.step_s,
            "max_s": chosen.max_s,
            "jitter": chosen.jitter,
        }
    cls = type(chosen)
    return {"kind": "custom", "class": f"{cls.__module__}.{cls.__qualname__}"}
