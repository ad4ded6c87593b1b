"""The testing kit: test code that enqueues, and handlers, without a daemon.

- :func:`assert_enqueued`, :func:`refute_enqueued`, :func:`enqueued_jobs`:
  what the code under test enqueued (args matched as a subset), with failure
  messages that list what *was* enqueued;
- :func:`drain`: run a queue's due jobs in the test's process through the
  engine's real claim and finish statements, and get their outcomes;
- :class:`TestServer`: a server, a migrated template and a database per test;
  :mod:`queue_engine.testing.pytest_plugin` serves them as fixtures (opt-in).

This package sits at the top of the layers, with the command line: it may use
the worker, and nothing in the engine imports it.
"""

from __future__ import annotations

from queue_engine.testing.assertions import assert_enqueued, enqueued_jobs, refute_enqueued
from queue_engine.testing.databases import TestServer
from queue_engine.testing.drain import DrainError, DrainOutcome, drain

__all__ = [
    "DrainError",
    "DrainOutcome",
    "TestServer",
    "assert_enqueued",
    "drain",
    "enqueued_jobs",
    "refute_enqueued",
]
