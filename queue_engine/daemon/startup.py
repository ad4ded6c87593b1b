"""Waiting for the database at start: one backoff and a deadline for every daemon.

A daemon started together with Postgres (a host boot, ``docker compose up``)
often finds it not accepting connections yet. Rather than exiting at once, it
retries for ``QUEUE_ENGINE_CONNECT_RETRY_S`` (default 10 s) and only then
gives up with exit 69 (``DatabaseUnavailable``), which the unit's restart
policy handles.

The retries follow :data:`STARTUP_BACKOFF` (capped exponential with jitter,
the engine's one :class:`~queue_engine.producer.retry.ExponentialBackoff`), and the
*last* wait is cut to what is left of the deadline: with a 10 s window the
final attempt happens at 10 s and the process exits then, not at 10 s plus a
whole backoff step. Clock, sleep and random source are injected, so the
schedule is unit-tested without waiting.

A stop request (SIGTERM while waiting) ends the wait with
:class:`StopRequested`; the runtime turns that into a clean exit 0.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.producer.retry import ExponentialBackoff

T = TypeVar("T")

#: 0.25 s, 0.5 s, 1 s, 2 s, 2 s ... (±25 %): quick while Postgres is starting, then steady.
STARTUP_BACKOFF = ExponentialBackoff(base_s=0.25, factor=2.0, max_s=2.0, jitter=0.25)

log = logging.getLogger("queue_engine.daemon")


class StopRequested(Exception):
    """A stop was asked for while the daemon was still starting: exit cleanly."""


def wait_for_database(
    probe: Callable[[], T],
    *,
    retry_s: float,
    stopping: Callable[[], bool] = lambda: False,
    on_first_failure: Callable[[DatabaseUnavailable], None] | None = None,
    backoff: ExponentialBackoff = STARTUP_BACKOFF,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """Call ``probe`` until it does not raise :class:`DatabaseUnavailable`; return its result.

    Gives up (re-raising the last error) once ``retry_s`` has passed since the
    first attempt; the wait before the last attempt ends at that deadline.
    ``on_first_failure`` is called once, for the single warning line.
    Raises :class:`StopRequested` when ``stopping()`` turns true.
    """
    deadline = clock() + max(0.0, retry_s)
    attempt = 0
    while True:
        if stopping():
            raise StopRequested()
        try:
            return probe()
        except DatabaseUnavailable as exc:
            if stopping():
                raise StopRequested() from exc
            now = clock()
            if now >= deadline:
                raise
            attempt += 1
            if attempt == 1 and on_first_failure is not None:
                on_first_failure(exc)
            delay = min(backoff.delay(attempt, rand), deadline - now)
            log.debug("database unavailable (attempt %d), retrying in %.2fs", attempt, delay)
            sleep(delay)
