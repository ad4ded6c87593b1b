"""Worker recycling: end the process after N jobs, past an RSS size, or past an age.

ETL handlers leak (memory, file descriptors, a C library's caches); a worker
that restarts itself every so often bounds what a leak can cost. The worker
checks its limits **between jobs**, never inside the claim statement (the hot
path stays one statement per job): when one is reached it finishes nothing
new, gives back the jobs it prefetched but did not start, flushes the
outcomes it holds, logs ``worker.recycle`` and exits
:attr:`~queue_engine.foundation.exit_codes.ExitCode.RECYCLE` (79), which its supervisor
(systemd, Compose) answers with a fresh process.

Three limits, any of them unset (or 0) to turn it off:

- ``max_jobs``: jobs handed to the runner since the start. The worker also
  never *claims* more than it has left to run, so reaching this limit gives
  nothing back;
- ``max_rss_mb``: the process's resident set size in MiB, read with psutil
  after each job (never before the first one: a worker whose import alone
  exceeds the limit would otherwise restart forever without doing any work);
- ``max_age_s``: seconds since the worker became ready (waiting for the
  database or the schema at start does not count), checked between jobs and
  while idle, so an idle worker recycles within one poll interval.

A fleet started together would recycle together (and, with ``max_age_s``,
leave a queue without workers for a moment at the same time every day): each
limit is scaled once at start by a factor drawn from ``[1 - spread, 1]``
(``spread`` 0.1 by default; the random source is injectable). A job limit is
rounded up, so a small one (below 10) stays exact.

:func:`decide` is the pure rule; :class:`Recycler` holds the counters and the
injected clock and RSS probe around it, so both are unit-tested without
running jobs or waiting.
"""

from __future__ import annotations

import functools
import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

import psutil

__all__ = ["RECYCLE_SPREAD", "Recycle", "RecycleLimits", "Recycler", "decide", "process_rss_mb"]

#: Each limit is scaled once at start by a factor in ``[1 - RECYCLE_SPREAD, 1]``.
RECYCLE_SPREAD = 0.1
#: Bytes in the "MB" of ``--max-rss`` (a MiB, as ``ps`` and ``top`` count).
MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RecycleLimits:
    """The worker's limits; None or 0 turns one off."""

    max_jobs: int | None = None
    max_rss_mb: float | None = None
    max_age_s: float | None = None

    @property
    def any(self) -> bool:
        """True when at least one limit is set."""
        return bool(self.max_jobs or self.max_rss_mb or self.max_age_s)

    def scaled(self, factor: float) -> RecycleLimits:
        """Every set limit times ``factor`` (the job count rounded up, and at least 1)."""
        return RecycleLimits(
            max_jobs=max(1, math.ceil(self.max_jobs * factor)) if self.max_jobs else None,
            max_rss_mb=self.max_rss_mb * factor if self.max_rss_mb else None,
            max_age_s=self.max_age_s * factor if self.max_age_s else None,
        )

    def log_fields(self) -> dict[str, float]:
        """The limits that are set, rounded for a log line (``worker.started``)."""
        fields: dict[str, float] = {}
        if self.max_jobs:
            fields["max_jobs"] = self.max_jobs
        if self.max_rss_mb:
            fields["max_rss_mb"] = round(self.max_rss_mb, 1)
        if self.max_age_s:
            fields["max_age_s"] = round(self.max_age_s, 3)
        return fields


@dataclass(frozen=True, slots=True)
class Recycle:
    """Why the worker recycles: the limit reached (``reason``), its value and what was seen."""

    reason: str
    limit: float
    value: float

    def describe(self) -> str:
        """One line for logs and the systemd status: ``max_jobs 3 reached (3)``."""
        return f"{self.reason} {self.limit:g} reached ({self.value:g})"


def decide(
    limits: RecycleLimits, *, jobs: int, age_s: float, rss_mb: float | None
) -> Recycle | None:
    """The limit this worker has reached, or None; checked in the order jobs, RSS, age.

    ``rss_mb`` None means not measured (no job since the last check, or the
    probe failed); an RSS limit is never reached before the first job.
    """
    if limits.max_jobs and jobs >= limits.max_jobs:
        return Recycle("max_jobs", limits.max_jobs, jobs)
    if limits.max_rss_mb and jobs > 0 and rss_mb is not None and rss_mb >= limits.max_rss_mb:
        return Recycle("max_rss_mb", round(limits.max_rss_mb, 1), round(rss_mb, 1))
    if limits.max_age_s and age_s >= limits.max_age_s:
        return Recycle("max_age_s", round(limits.max_age_s, 3), round(age_s, 3))
    return None


def process_rss_mb() -> float | None:
    """This process's resident set size in MiB (None when psutil cannot read it)."""
    try:
        return float(_this_process(os.getpid()).memory_info().rss) / MB
    except psutil.Error:
        return None


@functools.lru_cache(maxsize=1)
def _this_process(pid: int) -> psutil.Process:
    """One psutil handle per pid (building one reads ``/proc`` more than a probe does)."""
    return psutil.Process(pid)


class Recycler:
    """The worker's counters against its (spread) limits; the main loop asks between jobs."""

    def __init__(
        self,
        limits: RecycleLimits,
        *,
        clock: Callable[[], float],
        rss_mb: Callable[[], float | None] = process_rss_mb,
        rand: Callable[[], float] = random.random,
        spread: float = RECYCLE_SPREAD,
    ) -> None:
        """``rand`` returns a number in ``[0, 1)``: the factor is ``1 - spread * rand()``."""
        if not 0 <= spread < 1:
            raise ValueError("spread must be in [0, 1)")
        self.configured = limits
        self.factor = 1.0 - spread * rand()
        self.limits = limits.scaled(self.factor)
        self._clock = clock
        self._rss_mb = rss_mb
        self._started: float | None = None
        #: Jobs handed to the runner since the start.
        self.jobs = 0
        self._rss_checked_at = 0  # the job count when the RSS was last read
        self.reached: Recycle | None = None

    def start(self) -> None:
        """The worker is ready: its age counts from now."""
        self._started = self._clock()

    def age_s(self) -> float:
        """Seconds since :meth:`start` (0 before it)."""
        return 0.0 if self._started is None else self._clock() - self._started

    def job_done(self) -> None:
        """One more job went through the runner."""
        self.jobs += 1

    def claim_room(self, wanted: int, held: int) -> int:
        """How many of ``wanted`` jobs to claim when ``held`` wait unstarted.

        With a job limit the worker never claims a job it would only give back.
        """
        if not self.limits.max_jobs:
            return wanted
        return max(0, min(wanted, self.limits.max_jobs - self.jobs - held))

    def check(self) -> Recycle | None:
        """The limit reached now, or None; the RSS is read only when a job ran since the last read.

        Once a limit is reached the answer stays (the worker is on its way out).
        """
        if self.reached is not None:
            return self.reached
        limits = self.limits
        if not limits.any:
            return None
        rss = None
        if limits.max_rss_mb and self.jobs != self._rss_checked_at:
            self._rss_checked_at = self.jobs
            rss = self._rss_mb()
        self.reached = decide(limits, jobs=self.jobs, age_s=self.age_s(), rss_mb=rss)
        return self.reached

    def log_fields(self) -> dict[str, object]:
        """What ``worker.recycle`` says: the limit reached, its value, the jobs run and the age."""
        reached = self.reached
        fields: dict[str, object] = {}
        if reached is not None:
            fields.update(reason=reached.reason, limit=reached.limit, value=reached.value)
        fields.update(jobs=self.jobs, age_s=round(self.age_s(), 3))
        return fields

    def cap_wait(self, wait_s: float) -> float:
        """``wait_s``, cut so that an idle wait ends when the age limit is reached."""
        left = self.seconds_left()
        return wait_s if left is None else min(wait_s, left)

    def seconds_left(self) -> float | None:
        """Seconds until the age limit (None: no age limit), so an idle wait can end on time."""
        if not self.limits.max_age_s or self._started is None:
            return None
        return max(0.0, self.limits.max_age_s - self.age_s())
