"""The worker's settings: environment first, command-line options over it, checked at start.

Every value is validated when the settings are built, so a typo stops the
worker at once with exit code 2 instead of surfacing at the first job.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from queue_engine.foundation import settings as table
from queue_engine.foundation.config import resolve_dsn, resolve_schema
from queue_engine.foundation.errors import ConfigError
from queue_engine.producer.validation import check_queue_name

# Defaults and bounds come from the one settings table (queue_engine.foundation.settings);
# these names stay for the code and tests that import them.
DEFAULT_POLL_S = table.POLL_S.default
DEFAULT_HEARTBEAT_S = table.HEARTBEAT_S.default
DEFAULT_LEASE_TTL_S = table.LEASE_TTL_S.default
DEFAULT_SYNCHRONOUS_COMMIT = table.WORKER_SYNCHRONOUS_COMMIT.default
DEFAULT_CONNECT_RETRY_S = table.CONNECT_RETRY_S.default
DEFAULT_RECONNECT_MAX_S = table.RECONNECT_MAX_S.default
DEFAULT_FLUSH_INTERVAL_S = 0.5
DEFAULT_AFFINITY_WAIT_S = table.AFFINITY_WAIT_S.default
MAX_AFFINITY_KEY_LENGTH = int(table.WARM_KEY.maximum or 255)
MAX_PREFETCH = int(table.PREFETCH.maximum or 1000)
SYNCHRONOUS_COMMIT_VALUES = table.WORKER_SYNCHRONOUS_COMMIT.choices
DEFAULT_TIMEOUT_S = table.DEFAULT_TIMEOUT_S.default
DEFAULT_SHUTDOWN_GRACE_S = table.SHUTDOWN_GRACE_S.default
DEFAULT_CANCEL_GRACE_S = table.CANCEL_GRACE_S.default
DEFAULT_ZOMBIE_GRACE_S = table.ZOMBIE_GRACE_S.default
DEFAULT_HARD_DEADLINE_GRACE_S = table.HARD_DEADLINE_GRACE_S.default

#: The worker's fields that come from the settings table, and their settings.
ENV_FIELDS: dict[str, table.Setting[Any]] = {
    "queue": table.QUEUE,
    "app": table.APP,
    "prefetch": table.PREFETCH,
    "poll_s": table.POLL_S,
    "queue_poll_rate": table.QUEUE_POLL_RATE,
    "heartbeat_s": table.HEARTBEAT_S,
    "dead_after_s": table.DEAD_AFTER_S,
    "lease_ttl_s": table.LEASE_TTL_S,
    "synchronous_commit": table.WORKER_SYNCHRONOUS_COMMIT,
    "telemetry_notify": table.WORKER_TELEMETRY_NOTIFY,
    "connect_retry_s": table.CONNECT_RETRY_S,
    "reconnect_max_s": table.RECONNECT_MAX_S,
    "default_timeout_s": table.DEFAULT_TIMEOUT_S,
    "shutdown_grace_s": table.SHUTDOWN_GRACE_S,
    "cancel_grace_s": table.CANCEL_GRACE_S,
    "zombie_grace_s": table.ZOMBIE_GRACE_S,
    "hard_deadline_grace_s": table.HARD_DEADLINE_GRACE_S,
    "warm_key": table.WARM_KEY,
    "affinity_wait_s": table.AFFINITY_WAIT_S,
    "max_jobs": table.MAX_JOBS,
    "max_rss_mb": table.MAX_RSS_MB,
    "max_age_s": table.MAX_AGE,
}


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """Everything a worker process needs to know, validated.

    ``synchronous_commit`` applies to the worker's own session only (claims,
    finishes, heartbeats): a claim or finish lost in a Postgres crash means the
    job runs again, which at-least-once delivery allows. Producers and the
    handler's own connection (``ctx.connect()``) keep the server's setting.

    ``default_timeout_s`` is the wall-clock budget of jobs whose job row and
    task set none; the three graces are how long a running job is waited for
    after SIGTERM (then given back), after a cancel it ignores, and after its
    lease was found lost (both: then the process is hard-stopped, exit 77).
    ``hard_deadline_grace_s`` is how far past the budget the hard deadline
    (:mod:`.deadline`) ends a process frozen with the GIL held (exit 1).

    ``warm_key`` is the affinity key the worker starts warm for (a model it
    preloads, say); after each job that names an affinity key the worker is
    warm for that one. ``affinity_wait_s`` bounds how long the preference may
    hold back the job at the head of the queue.

    ``reconnect_max_s`` caps the backoff between reconnects after a lost
    database (``QUEUE_ENGINE_RECONNECT_MAX_S``, the same setting and default
    as the orchestrator's and the scheduler's).

    ``max_jobs``, ``max_rss_mb`` and ``max_age_s`` recycle the worker (exit
    79, see :mod:`queue_engine.worker.recycle`): None or 0 means no limit.
    """

    queue: str
    app: str
    dsn: str = ""
    schema: str = table.SCHEMA.default
    prefetch: int = table.PREFETCH.default
    poll_s: float = DEFAULT_POLL_S
    #: Safety polls per second of the queue's idle workers together (0: every
    #: worker polls every ``poll_s``): see :func:`~queue_engine.worker.idle.poll_interval`.
    queue_poll_rate: float = table.QUEUE_POLL_RATE.default
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    #: When the views and the dead-worker sweep count a worker dead (None:
    #: three heartbeats); an idle worker beats often enough to stay clear of it.
    dead_after_s: float | None = None
    lease_ttl_s: int = DEFAULT_LEASE_TTL_S
    synchronous_commit: str = DEFAULT_SYNCHRONOUS_COMMIT
    #: "on": publish each heartbeat's telemetry on ``<schema>.telemetry`` (off by
    #: default: a NOTIFY wakes every listening session of the database, so in a
    #: fleet of N workers N heartbeats cost N x N wake-ups; dashboards read the
    #: telemetry from the workers table instead).
    telemetry_notify: str = "off"
    connect_retry_s: float = DEFAULT_CONNECT_RETRY_S
    reconnect_max_s: float = DEFAULT_RECONNECT_MAX_S
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S
    cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S
    zombie_grace_s: float = DEFAULT_ZOMBIE_GRACE_S
    hard_deadline_grace_s: float = DEFAULT_HARD_DEADLINE_GRACE_S
    warm_key: str | None = None
    affinity_wait_s: float = DEFAULT_AFFINITY_WAIT_S
    max_jobs: int | None = None
    max_rss_mb: int | None = None
    max_age_s: float | None = None

    def __post_init__(self) -> None:
        try:
            check_queue_name(self.queue)
        except ValueError as exc:
            raise ConfigError(f"--queue: {exc}") from None
        resolve_schema(self.schema)
        table.check_fields(ENV_FIELDS, self)
        if self.lease_ttl_s <= self.heartbeat_s:
            raise ConfigError(
                f"QUEUE_ENGINE_LEASE_TTL_S ({self.lease_ttl_s}) must be longer than "
                f"QUEUE_ENGINE_HEARTBEAT_S ({self.heartbeat_s:g}), or every lease expires "
                "before it is renewed (3 heartbeats per lease is a good ratio)"
            )
        if not self.flush_interval_s >= 0:
            raise ConfigError("flush_interval_s must be >= 0")

    def dead_after(self) -> float:
        """``dead_after_s``, or three heartbeats when unset (the sweep's and the views' rule)."""
        if self.dead_after_s is not None:
            return self.dead_after_s
        return table.DEAD_AFTER_BEATS * self.heartbeat_s

    @classmethod
    def from_env(cls, **overrides: object) -> WorkerSettings:
        """Build settings from ``QUEUE_ENGINE_*`` variables; non-None ``overrides`` win.

        Every field backed by the settings table is read through it (so its
        default, bounds and error message are the table's), including
        ``QUEUE_ENGINE_PREFETCH``, which only the command line used to honour.
        """
        given_dsn = overrides.get("dsn")
        values: dict[str, object] = {
            "dsn": resolve_dsn(given_dsn if isinstance(given_dsn, str) and given_dsn else None),
            "schema": resolve_schema(None),
            **table.read_fields(ENV_FIELDS),
        }
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in overrides.items():
            if key not in names:
                raise ConfigError(f"unknown worker setting {key!r}")
            if value is not None and value != "":
                values[key] = value
        if not values["queue"]:
            raise ConfigError("no queue given: pass --queue NAME or set QUEUE_ENGINE_QUEUE")
        values["app"] = values["app"] or ""
        return cls(**values)  # type: ignore[arg-type]
