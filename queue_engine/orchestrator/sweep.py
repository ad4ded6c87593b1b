"""The shape every leader-only sweep shares: one connection, bounded batches, a pinnable clock.

The lease reaper, the dead-worker sweep, fast recovery and the pruner each run
named statements against the engine schema every interval. What they have in
common is written here once:

- construction: the DSN and schema, the cadence and first-run stagger, the
  batch bounds (``batch_size`` rows per statement, ``max_batches`` statements
  per run), and ``now``, which returns the instant the sweep compares with
  (None: the database's ``now()``, so production uses database time and tests
  pin it). A sweep states its defaults as class attributes and adds only its
  own options to the constructor;
- the connection: one autocommit connection of the service's own with TCP
  keepalives, opened on first use; :meth:`SweepService.session` hands it to a
  run, drops it when the run hits a connection error (the next run
  reconnects, spaced by the service's error backoff) and closes it on stop;
- the batch loop: :func:`run_batches` takes batches until one says nothing is
  left, ``max_batches`` ran, or the service is stopping, so one run (and each
  of its transactions) stays bounded even after a mass failure;
- working off a backlog (:class:`BacklogSweep`, the pruner and the archiver):
  a run that stopped at ``max_batches`` with rows left says ``more``, and the
  next run comes after ``catch_up_s`` instead of the full interval.

A sweep subclass says only what one run does and how to log it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypedDict, TypeVar, Unpack

import psycopg

from queue_engine.daemon.service import (
    REAL_TIMING,
    STAGGER_DEFAULT_S,
    R,
    Service,
    ServiceResult,
    Timing,
)
from queue_engine.foundation.config import validate_schema
from queue_engine.foundation.db import KEEPALIVE_KWARGS, LazyConnection

#: ``now()``: the instant a sweep compares with, or None for the database's clock.
Now = Callable[[], datetime | None]
#: Pause between runs of a :class:`BacklogSweep` while rows are left (seconds).
CATCH_UP_DEFAULT_S = 1.0


def database_now() -> datetime | None:
    """The production clock of a sweep: None, so statements use the database's ``now()``."""
    return None


def run_batches(
    batch: Callable[[], bool], *, max_batches: int, stopping: Callable[[], bool]
) -> int:
    """Call ``batch`` (one statement, one transaction) while it says work is left; return how many ran.

    Stops after ``max_batches`` batches, or before the next one once ``stopping()``
    is true (a run in progress finishes its statement, then the service stops).
    """
    if max_batches < 1:
        raise ValueError(f"max_batches must be >= 1, got {max_batches!r}")
    ran = 0
    while ran < max_batches and not stopping():
        ran += 1
        if not batch():
            break
    return ran


class SweepOptions(TypedDict, total=False):
    """The constructor options every sweep takes (its own come first)."""

    interval_s: float
    batch_size: int
    max_batches: int
    now: Now
    stagger_s: float
    timing: Timing


class SweepService(Service[R]):
    """A leader-only service working through batches on a connection of its own."""

    #: Seconds between runs unless ``interval_s`` is given (each sweep sets it).
    interval_default_s: ClassVar[float]
    #: Rows per statement unless ``batch_size`` is given (each sweep sets it).
    batch_size_default: ClassVar[int]
    #: Statements per run unless ``max_batches`` is given.
    max_batches_default: ClassVar[int] = 1
    #: Upper bound of the random first-run delay unless ``stagger_s`` is given.
    stagger_default_s: ClassVar[float] = STAGGER_DEFAULT_S

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        interval_s: float | None = None,
        batch_size: int | None = None,
        max_batches: int | None = None,
        now: Now = database_now,
        stagger_s: float | None = None,
        timing: Timing = REAL_TIMING,
    ) -> None:
        super().__init__(
            interval_s=self.interval_default_s if interval_s is None else interval_s,
            stagger_s=self.stagger_default_s if stagger_s is None else stagger_s,
            timing=timing,
        )
        self.batch_size = self.batch_size_default if batch_size is None else batch_size
        self.max_batches = self.max_batches_default if max_batches is None else max_batches
        if self.batch_size < 1 or self.max_batches < 1:
            raise ValueError(f"{type(self).__name__}: batch_size and max_batches must be >= 1")
        self.schema = validate_schema(schema)
        #: Returns the instant the sweep compares with; None means the database's now().
        self.now = now
        self.db = LazyConnection(dsn, **KEEPALIVE_KWARGS)

    def session(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """The service's connection for one run (:meth:`LazyConnection.session`).

        A connection error, a read-only server's refusal included
        (:data:`~queue_engine.foundation.db.RECONNECT_ERRORS`), drops it and propagates:
        the next run opens a new one, after the service's error backoff.
        """
        return self.db.session()

    def batches(self, batch: Callable[[], bool]) -> int:
        """:func:`run_batches` with this service's ``max_batches`` and stop flag."""
        return run_batches(batch, max_batches=self.max_batches, stopping=lambda: self.stopping)

    def on_stop(self) -> None:
        """Close the service's connection."""
        self.db.reset()


class Backlog(ServiceResult, Protocol):
    """A run's result that also says whether rows were left when it stopped."""

    @property
    def more(self) -> bool: ...


B = TypeVar("B", bound=Backlog)


class BacklogSweep(SweepService[B]):
    """A sweep that works a backlog off in short bites: ``catch_up_s`` between runs while ``more``."""

    def __init__(
        self,
        dsn: str,
        schema: str,
        *,
        catch_up_s: float = CATCH_UP_DEFAULT_S,
        **options: Unpack[SweepOptions],
    ) -> None:
        super().__init__(dsn, schema, **options)
        self.catch_up_s = min(catch_up_s, self.interval_s)

    def next_interval(self, result: B | None) -> float:
        """Come back soon while rows are left, else after the full interval."""
        if result is not None and result.more:
            return self.catch_up_s
        return super().next_interval(result)
