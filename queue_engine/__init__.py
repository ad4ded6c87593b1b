"""queue-engine: a Postgres-backed job queue for Python, run as small daemons.

The public API: :class:`Client` and :class:`AsyncClient` to enqueue and manage
jobs, :func:`task` to register handlers, :class:`Job` and :class:`JobStatus`
to read them, :class:`Workflow` to build DAGs of jobs, and the exceptions in
:mod:`queue_engine.errors`.
"""

from __future__ import annotations

from queue_engine.async_client import AsyncClient
from queue_engine.client import Client
from queue_engine.errors import (
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
from queue_engine.jobs import Job, JobStatus
from queue_engine.migrate import Migrator, wait_for_schema
from queue_engine.retry import ExponentialBackoff, FixedBackoff, Permanent, Skip, Snooze
from queue_engine.scheduler.schedules import periodic
from queue_engine.tasks import registry, task
from queue_engine.workflows import After, Workflow, WorkflowInfo, WorkflowState, finished
from queue_engine.workflows.refs import result_of

__version__ = "0.1.0"

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
