"""Connection and schema resolution: the two settings every process needs.

Every setting has one name, ``QUEUE_ENGINE_<NAME>``, and the same meaning in
every process; command-line options override the environment. The names,
defaults and bounds live in one table, :mod:`queue_engine.foundation.settings`, and every
variable is read through it; this module resolves the DSN (explicit, the
environment, else the local fleet's) and checks the schema name.
"""

from __future__ import annotations

import logging
import re

from queue_engine.foundation import localfleet, settings
from queue_engine.foundation.errors import ConfigError

DEFAULT_SCHEMA = settings.SCHEMA.default
log = logging.getLogger("queue_engine.config")

SCHEMA_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")


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
    if schema:
        return validate_schema(schema)
    from_env = settings.SCHEMA.read()
    try:
        return validate_schema(from_env)
    except ConfigError as exc:
        raise ConfigError(f"{settings.SCHEMA.env}: {exc}") from None


def resolve_dsn(dsn: str | None = None) -> str:
    """Return the explicit DSN, else ``QUEUE_ENGINE_DSN``, else the local fleet's, else "".

    The local fleet is the database of a running ``queue-ctl up``
    (:mod:`queue_engine.foundation.localfleet`), used only when no libpq variable names a
    server; "" leaves the choice to libpq's defaults and ``PG*`` variables.
    """
    chosen, fleet = localfleet.resolve(dsn)
    if fleet is not None:
        log.info("no DSN configured: using %s", fleet.describe())
    return chosen
