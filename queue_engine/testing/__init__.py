"""The testing kit: test code that enqueues, and handlers, without a daemon.

- :func:`assert_enqueued`, :func:`refute_enqueued`, :func:`enqueued_jobs`:
  what the code under test enqueued (args matched as a subset), with failure
  messages that list what *was* enqueued; their asyncio twins
  :func:`assert_enqueued_async`, :func:`refute_enqueued_async`,
  :func:`enqueued_jobs_async` take an ``AsyncClient``, an ``AsyncConnection``
  or a DSN (the synchronous ones are generated from them:
  ``scripts/async_to_sync.py``);
- :func:`drain`: run a queue's due jobs in the test's process through the
  engine's real claim and finish statements, and get their outcomes;
- time control: a :class:`TestClock` the test moves by hand, :func:`tick` to
  run the scheduler's ticker once at its instant, :func:`sync_schedules` to
  write the app's ``@periodic`` schedules as a scheduler does, and
  ``drain(at=clock)`` to run the jobs due by then;
- :class:`TestServer`: a server, a migrated template and a database per test;
  :mod:`queue_engine.testing.pytest_plugin` serves them as fixtures (opt-in).

This package sits at the top of the layers, with the command line: it may use
the worker, and nothing in the engine imports it.
"""

from __future__ import annotations

from queue_engine.testing.assertions import assert_enqueued, enqueued_jobs, refute_enqueued
from queue_engine.testing.async_assertions import (
    assert_enqueued_async,
    enqueued_jobs_async,
    refute_enqueued_async,
)
from queue_engine.testing.clock import TestClock
from queue_engine.testing.databases import TestServer
from queue_engine.testing.drain import DrainError, DrainOutcome, drain
from queue_engine.testing.scheduling import sync_schedules, tick

__all__ = [
    "DrainError",
    "DrainOutcome",
    "TestClock",
    "TestServer",
    "assert_enqueued",
    "assert_enqueued_async",
    "drain",
    "enqueued_jobs",
    "enqueued_jobs_async",
    "refute_enqueued",
    "refute_enqueued_async",
    "sync_schedules",
    "tick",
]
