"""Exceptions raised by queue-engine.

Each exception's message is a complete, one-line sentence meant for a human:
the CLI prints it as is, so it must say what went wrong and, where possible,
what to do about it.
"""

from __future__ import annotations

from queue_engine.foundation.exit_codes import ExitCode


class QueueEngineError(Exception):
    """Base class of every error queue-engine raises on purpose."""

    exit_code: ExitCode = ExitCode.FAILURE


class ValidationError(QueueEngineError, ValueError):
    """Bad input, refused before anything was written."""

    exit_code = ExitCode.USAGE


class ConfigError(QueueEngineError):
    """Bad configuration (environment variable, option, app module)."""

    exit_code = ExitCode.USAGE


class JobNotFound(QueueEngineError, LookupError):
    """No job has that id (it never existed or was pruned)."""

    def __init__(self, job_id: int) -> None:
        super().__init__(f"job {job_id} not found")
        self.job_id = job_id


class WorkflowNotFound(QueueEngineError, LookupError):
    """No workflow has that id (it never existed or was pruned), or it has no such node."""

    def __init__(self, workflow_id: int, node: str | None = None) -> None:
        what = (
            f"workflow {workflow_id}" if node is None else f"node {node} of workflow {workflow_id}"
        )
        super().__init__(f"{what} not found")
        self.workflow_id = workflow_id
        self.node = node


class InvalidTransition(QueueEngineError):
    """The requested operation does not apply to the job's current status."""


class DatabaseUnavailable(QueueEngineError):
    """The database cannot be reached; the message never contains the password."""

    exit_code = ExitCode.UNAVAILABLE


class SchemaMissing(QueueEngineError):
    """The engine's tables are absent or older than this code needs."""

    exit_code = ExitCode.MIGRATION


class MigrationError(QueueEngineError):
    """A migration chain is malformed or a migration failed."""

    exit_code = ExitCode.MIGRATION
