"""Settings read from the environment, with documented defaults.

Every setting has one name, ``QUEUE_ENGINE_<NAME>``, and the same meaning in
every process; command-line options override the environment. Values are
validated when read so that a typo fails at start with a clear message rather
than at the first job.
"""

from __future__ import annotations

import os
import re

from queue_engine.errors import ConfigError

DEFAULT_SCHEMA = "queue_engine"
SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


def env_str(name: str, default: str | None = None) -> str | None:
    """Return ``QUEUE_ENGINE_<name>`` or the default when unset or empty."""
    value = os.environ.get(f"QUEUE_ENGINE_{name}", "")
    return value if value != "" else default


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    """Return a numeric setting, refusing non-numbers and values below ``minimum``."""
    raw = env_str(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"QUEUE_ENGINE_{name}={raw!r} is not a number") from None
    if value < minimum:
        raise ConfigError(f"QUEUE_ENGINE_{name}={raw!r} must be at least {minimum:g}")
    return value


def validate_schema(schema: str) -> str:
    """Check an engine schema name; it becomes a quoted identifier and a NOTIFY channel."""
    if not SCHEMA_PATTERN.match(schema):
        raise ConfigError(
            f"invalid schema name {schema!r}: use 1-40 characters of a-z, 0-9 and _, "
            "not starting with a digit"
        )
    return schema


def resolve_schema(schema: str | None = None) -> str:
    """Return the explicit schema, else ``QUEUE_ENGINE_SCHEMA``, else ``queue_engine``."""
    return validate_schema(schema or env_str("SCHEMA", DEFAULT_SCHEMA) or DEFAULT_SCHEMA)


def resolve_dsn(dsn: str | None = None) -> str:
    """Return the explicit DSN, else ``QUEUE_ENGINE_DSN``, else "" (libpq ``PG*`` variables)."""
    return dsn or env_str("DSN", "") or ""
