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
from collections.abc import Callable
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
        return max(0.0, raw * (1 + self.jitter * (2 * rand() - 1)))


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
    cls = type(chosen)
    return {"kind": "custom", "class": f"{cls.__module__}.{cls.__qualname__}"}
