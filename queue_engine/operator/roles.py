"""The least-privilege role template (``sql/roles.sql``), rendered for one schema.

Not a migration: roles are cluster-wide and belong to the operator, who may
already have a naming scheme, so the engine never creates them by itself.
``queue-ctl roles`` prints the template for the configured schema (and role
names); ``--apply`` runs it.
"""

from __future__ import annotations

import re

from queue_engine.foundation import sql as queries
from queue_engine.foundation.errors import ConfigError

WORKER_ROLE = "queue_engine_worker"
PRODUCER_ROLE = "queue_engine_producer"
MONITOR_ROLE = "queue_engine_monitor"

#: Plain lower-case identifiers only: the name is used both as an identifier and
#: inside a string literal of the template, so it must need no quoting at all.
ROLE_PATTERN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def validate_role(name: str) -> str:
    """Check a role name for the template."""
    if not ROLE_PATTERN.match(name):
        raise ConfigError(
            f"invalid role name {name!r}: use 1-63 characters of a-z, 0-9 and _, "
            "not starting with a digit"
        )
    return name


def roles_sql(
    schema: str,
    *,
    worker: str = WORKER_ROLE,
    producer: str = PRODUCER_ROLE,
    monitor: str = MONITOR_ROLE,
) -> str:
    """The role template for ``schema`` with the given group role names."""
    text: str = queries.query("roles", schema)
    for placeholder, name in (
        ("__WORKER_ROLE__", worker),
        ("__PRODUCER_ROLE__", producer),
        ("__MONITOR_ROLE__", monitor),
    ):
        text = text.replace(placeholder, validate_role(name))
    return text
