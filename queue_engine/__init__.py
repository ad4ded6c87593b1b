"""queue-engine: a Postgres-backed job queue for Python, run as small daemons.

The public API: :class:`Client` and :class:`AsyncClient` to enqueue and manage
jobs (:class:`EnqueueOptions`, the options of an enqueue), :func:`task` to
register handlers and :class:`JobContext`, what a handler sees of its job,
:class:`Job` and :class:`JobStatus` to read them, :class:`Workflow` to build
DAGs of jobs, and the exceptions. They live in the producer API
(``queue_engine/producer/``) and the foundation (``queue_engine/foundation/``);
docs/internals/architecture.md describes the package's wings.

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
    from queue_engine.producer.async_client import AsyncClient
    from queue_engine.producer.client import Client
    from queue_engine.producer.context import JobContext
    from queue_engine.producer.ingest import ingest
    from queue_engine.producer.jobs import Job, JobStatus
    from queue_engine.producer.retry import (
        ExponentialBackoff,
        FixedBackoff,
        LinearBackoff,
        Permanent,
        Skip,
        Snooze,
        StepBackoff,
    )
    from queue_engine.producer.schedules import periodic
    from queue_engine.producer.tasks import registry, task
    from queue_engine.producer.validation import EnqueueOptions
    from queue_engine.producer.worker_processes import WorkerProcesses
    from queue_engine.producer.workflows import (
        After,
        Workflow,
        WorkflowInfo,
        WorkflowState,
        finished,
    )
    from queue_engine.producer.workflows.providers import workflow
    from queue_engine.producer.workflows.refs import result_of

#: Each public name and the module it comes from (the imports above, as data).
_PUBLIC: dict[str, str] = {
    "__version__": "queue_engine.foundation.version",
    "AsyncClient": "queue_engine.producer.async_client",
    "Client": "queue_engine.producer.client",
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
    "EnqueueOptions": "queue_engine.producer.validation",
    "Job": "queue_engine.producer.jobs",
    "JobContext": "queue_engine.producer.context",
    "JobStatus": "queue_engine.producer.jobs",
    "Migrator": "queue_engine.foundation.migrate",
    "wait_for_schema": "queue_engine.foundation.migrate",
    **dict.fromkeys(
        (
            "ExponentialBackoff",
            "FixedBackoff",
            "LinearBackoff",
            "Permanent",
            "Skip",
            "Snooze",
            "StepBackoff",
        ),
        "queue_engine.producer.retry",
    ),
    "periodic": "queue_engine.producer.schedules",
    "registry": "queue_engine.producer.tasks",
    "task": "queue_engine.producer.tasks",
    **dict.fromkeys(
        ("After", "Workflow", "WorkflowInfo", "WorkflowState", "finished"),
        "queue_engine.producer.workflows",
    ),
    "result_of": "queue_engine.producer.workflows.refs",
    "ingest": "queue_engine.producer.ingest",
    "workflow": "queue_engine.producer.workflows.providers",
    "WorkerProcesses": "queue_engine.producer.worker_processes",
}

#: The public names (``tests/unit/test_layers.py`` holds them to ``_PUBLIC`` and the imports above).
__all__ = [
    "After",
    "AsyncClient",
    "Client",
    "ConfigError",
    "DatabaseUnavailable",
    "EnqueueOptions",
    "ExponentialBackoff",
    "FixedBackoff",
    "InvalidTransition",
    "Job",
    "JobContext",
    "JobNotFound",
    "JobStatus",
    "LinearBackoff",
    "MigrationError",
    "Migrator",
    "Permanent",
    "QueueEngineError",
    "SchemaMissing",
    "Skip",
    "Snooze",
    "StepBackoff",
    "ValidationError",
    "WorkerProcesses",
    "Workflow",
    "WorkflowInfo",
    "WorkflowNotFound",
    "WorkflowState",
    "__version__",
    "finished",
    "ingest",
    "periodic",
    "registry",
    "result_of",
    "task",
    "wait_for_schema",
    "workflow",
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
