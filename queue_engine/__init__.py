"""queue-engine: a Postgres-backed job queue for Python, run as small daemons.

The public API: :class:`Client` and :class:`AsyncClient` to enqueue and manage
jobs, :func:`task` to register handlers, :class:`Job` and :class:`JobStatus`
to read them, :class:`Workflow` to build DAGs of jobs, and the exceptions in
:mod:`queue_engine.foundation.errors`.

The names are loaded when first used (PEP 562's module ``__getattr__``), not
when the package is imported: every ``import queue_engine.<module>`` runs this
file first, and an eager import of the whole producer API here cost every
console script (``queue-ctl status``, a daemon's ``--help``) about a tenth of a
second before it did anything. ``from queue_engine import Client`` and
``queue_engine.Client`` work as before; type checkers read the imports below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from queue_engine.async_client import AsyncClient
    from queue_engine.client import Client
    from queue_engine.foundation.errors import (
        ConfigError,
        DatabaseUnavailable,
        InvalidTransition,
        JobNotFound,
        MigrationError,
        QueueEngineError,
        SchemaMissing,
        ValidationError,
        WorkflowNotFound,
    )
    from queue_engine.foundation.migrate import Migrator, wait_for_schema
    from queue_engine.foundation.version import __version__
    from queue_engine.jobs import Job, JobStatus
    from queue_engine.retry import ExponentialBackoff, FixedBackoff, Permanent, Skip, Snooze
    from queue_engine.scheduler.schedules import periodic
    from queue_engine.tasks import registry, task
    from queue_engine.workflows import After, Workflow, WorkflowInfo, WorkflowState, finished
    from queue_engine.workflows.refs import result_of

#: Each public name and the module it comes from (the imports above, as data).
_PUBLIC: dict[str, str] = {
    "__version__": "queue_engine.foundation.version",
    "AsyncClient": "queue_engine.async_client",
    "Client": "queue_engine.client",
    **dict.fromkeys(
        (
            "ConfigError",
            "DatabaseUnavailable",
            "InvalidTransition",
            "JobNotFound",
            "MigrationError",
            "QueueEngineError",
            "SchemaMissing",
            "ValidationError",
            "WorkflowNotFound",
        ),
        "queue_engine.foundation.errors",
    ),
    "Job": "queue_engine.jobs",
    "JobStatus": "queue_engine.jobs",
    "Migrator": "queue_engine.foundation.migrate",
    "wait_for_schema": "queue_engine.foundation.migrate",
    **dict.fromkeys(
        ("ExponentialBackoff", "FixedBackoff", "Permanent", "Skip", "Snooze"),
        "queue_engine.retry",
    ),
    "periodic": "queue_engine.scheduler.schedules",
    "registry": "queue_engine.tasks",
    "task": "queue_engine.tasks",
    **dict.fromkeys(
        ("After", "Workflow", "WorkflowInfo", "WorkflowState", "finished"),
        "queue_engine.workflows",
    ),
    "result_of": "queue_engine.workflows.refs",
}

#: The public names (``tests/unit/test_layers.py`` holds them to ``_PUBLIC`` and the imports above).
__all__ = [
    "After",
    "AsyncClient",
    "Client",
    "ConfigError",
    "DatabaseUnavailable",
    "ExponentialBackoff",
    "FixedBackoff",
    "InvalidTransition",
    "Job",
    "JobNotFound",
    "JobStatus",
    "MigrationError",
    "Migrator",
    "Permanent",
    "QueueEngineError",
    "SchemaMissing",
    "Skip",
    "Snooze",
    "ValidationError",
    "Workflow",
    "WorkflowInfo",
    "WorkflowNotFound",
    "WorkflowState",
    "__version__",
    "finished",
    "periodic",
    "registry",
    "result_of",
    "task",
    "wait_for_schema",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and keep the name (PEP 562)."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes and the public names not loaded yet."""
    return sorted({*globals(), *_PUBLIC})
