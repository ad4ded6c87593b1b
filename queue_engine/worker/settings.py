"""The worker's settings: environment first, command-line options over it, checked at start.

Every value is validated when the settings are built, so a typo stops the
worker at once with exit code 2 instead of surfacing at the first job.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from queue_engine.config import env_float, env_str, resolve_dsn, resolve_schema
from queue_engine.errors import ConfigError
from queue_engine.validation import check_queue_name
from queue_engine.worker import watchdog

DEFAULT_POLL_S = 1.0
DEFAULT_HEARTBEAT_S = 10.0
DEFAULT_LEASE_TTL_S = 60
DEFAULT_SYNCHRONOUS_COMMIT = "off"
DEFAULT_CONNECT_RETRY_S = 10.0
DEFAULT_FLUSH_INTERVAL_S = 0.5
DEFAULT_AFFINITY_WAIT_S = 10.0
MAX_AFFINITY_KEY_LENGTH = 255
MAX_PREFETCH = 1000
SYNCHRONOUS_COMMIT_VALUES = ("on", "off", "local", "remote_write", "remote_apply")
DEFAULT_TIMEOUT_S = watchdog.DEFAULT_TIMEOUT_S
DEFAULT_SHUTDOWN_GRACE_S = watchdog.SHUTDOWN_GRACE_DEFAULT_S
DEFAULT_CANCEL_GRACE_S = watchdog.CANCEL_GRACE_DEFAULT_S
DEFAULT_ZOMBIE_GRACE_S = watchdog.ZOMBIE_GRACE_DEFAULT_S


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

    ``warm_key`` is the affinity key the worker starts warm for (a model it
    preloads, say); after each job that names an affinity key the worker is
    warm for that one. ``affinity_wait_s`` bounds how long the preference may
    hold back the job at the head of the queue.
    """

    queue: str
    app: str
    dsn: str = ""
    schema: str = "queue_engine"
    prefetch: int = 1
    poll_s: float = DEFAULT_POLL_S
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    lease_ttl_s: int = DEFAULT_LEASE_TTL_S
    synchronous_commit: str = DEFAULT_SYNCHRONOUS_COMMIT
    connect_retry_s: float = DEFAULT_CONNECT_RETRY_S
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    default_timeout_s: float = DEFAULT_TIMEOUT_S
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S
    cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S
    zombie_grace_s: float = DEFAULT_ZOMBIE_GRACE_S
    warm_key: str | None = None
    affinity_wait_s: float = DEFAULT_AFFINITY_WAIT_S

    def __post_init__(self) -> None:
        try:
            check_queue_name(self.queue)
        except ValueError as exc:
            raise ConfigError(f"--queue: {exc}") from None
        resolve_schema(self.schema)
        if isinstance(self.prefetch, bool) or not 1 <= self.prefetch <= MAX_PREFETCH:
            raise ConfigError(f"--prefetch must be between 1 and {MAX_PREFETCH}")
        if not self.poll_s > 0:
            raise ConfigError("QUEUE_ENGINE_POLL_S must be > 0")
        if not self.heartbeat_s > 0:
            raise ConfigError("QUEUE_ENGINE_HEARTBEAT_S must be > 0")
        if not 1 <= self.lease_ttl_s <= 86400:
            raise ConfigError("QUEUE_ENGINE_LEASE_TTL_S must be between 1 and 86400")
        if self.lease_ttl_s <= self.heartbeat_s:
            raise ConfigError(
                f"QUEUE_ENGINE_LEASE_TTL_S ({self.lease_ttl_s}) must be longer than "
                f"QUEUE_ENGINE_HEARTBEAT_S ({self.heartbeat_s:g}), or every lease expires "
                "before it is renewed (3 heartbeats per lease is a good ratio)"
            )
        if not self.default_timeout_s > 0:
            raise ConfigError("QUEUE_ENGINE_DEFAULT_TIMEOUT_S must be > 0")
        for name, value in (
            ("SHUTDOWN_GRACE_S", self.shutdown_grace_s),
            ("CANCEL_GRACE_S", self.cancel_grace_s),
            ("ZOMBIE_GRACE_S", self.zombie_grace_s),
        ):
            if not value >= 0:
                raise ConfigError(f"QUEUE_ENGINE_{name} must be >= 0")
        if self.warm_key is not None and not 1 <= len(self.warm_key) <= MAX_AFFINITY_KEY_LENGTH:
            raise ConfigError(f"--warm-key must be 1 to {MAX_AFFINITY_KEY_LENGTH} characters long")
        if not self.affinity_wait_s >= 0:
            raise ConfigError("QUEUE_ENGINE_AFFINITY_WAIT_S must be >= 0")
        if self.synchronous_commit not in SYNCHRONOUS_COMMIT_VALUES:
            raise ConfigError(
                f"QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT={self.synchronous_commit!r}: "
                f"use one of {', '.join(SYNCHRONOUS_COMMIT_VALUES)}"
            )

    @classmethod
    def from_env(cls, **overrides: object) -> WorkerSettings:
        """Build settings from ``QUEUE_ENGINE_*`` variables; non-None ``overrides`` win."""
        lease = env_float("LEASE_TTL_S", DEFAULT_LEASE_TTL_S, minimum=1)
        if lease != int(lease):
            raise ConfigError("QUEUE_ENGINE_LEASE_TTL_S must be a whole number of seconds")
        values: dict[str, object] = {
            "queue": env_str("QUEUE", "") or "",
            "app": env_str("APP", "") or "",
            "dsn": resolve_dsn(None),
            "schema": resolve_schema(None),
            "poll_s": env_float("POLL_S", DEFAULT_POLL_S, minimum=0.001),
            "heartbeat_s": env_float("HEARTBEAT_S", DEFAULT_HEARTBEAT_S, minimum=0.01),
            "lease_ttl_s": int(lease),
            "synchronous_commit": (
                env_str("WORKER_SYNCHRONOUS_COMMIT", DEFAULT_SYNCHRONOUS_COMMIT) or "off"
            ).lower(),
            "connect_retry_s": env_float("CONNECT_RETRY_S", DEFAULT_CONNECT_RETRY_S),
            "default_timeout_s": env_float("DEFAULT_TIMEOUT_S", DEFAULT_TIMEOUT_S, minimum=0.001),
            "shutdown_grace_s": env_float("SHUTDOWN_GRACE_S", DEFAULT_SHUTDOWN_GRACE_S),
            "cancel_grace_s": env_float("CANCEL_GRACE_S", DEFAULT_CANCEL_GRACE_S),
            "zombie_grace_s": env_float("ZOMBIE_GRACE_S", DEFAULT_ZOMBIE_GRACE_S),
            "warm_key": env_str("WARM_KEY", "") or None,
            "affinity_wait_s": env_float("AFFINITY_WAIT_S", DEFAULT_AFFINITY_WAIT_S),
        }
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in overrides.items():
            if key not in names:
                raise ConfigError(f"unknown worker setting {key!r}")
            if value is not None and value != "":
                values[key] = value
        if not values["queue"]:
            raise ConfigError("no queue given: pass --queue NAME or set QUEUE_ENGINE_QUEUE")
        return cls(**values)  # type: ignore[arg-type]
