"""Named SQL statements, one file each, rendered once per engine schema.

All of the engine's runtime SQL lives in this folder so it can be read and
reviewed in one place (the demo's and the bench's reports, which no engine
process sends, are that wing's own, in ``queue_engine/demo/sql/``). Files use
psycopg's ``%(name)s`` parameters for every value. What a parameter cannot
carry is put into the text in one of three ways (docs/internals/sql.md):
``__SCHEMA__``, replaced here by the quoted, validated engine schema
identifier; ``{name}`` placeholders for an identifier chosen per call, filled
by the caller with psycopg's ``sql.Identifier``; and the line tags of a
statement with several variants, read by
:mod:`queue_engine.foundation.sql.compiler`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import LiteralString

from psycopg import sql

from queue_engine.foundation.config import validate_schema

SCHEMA_PLACEHOLDER = "__SCHEMA__"


def render(text: str, schema: str) -> LiteralString:
    """Substitute the quoted schema identifier into a statement's text."""
    quoted = sql.Identifier(validate_schema(schema)).as_string()
    return text.replace(SCHEMA_PLACEHOLDER, quoted)


@cache
def source(name: str, package: str = __package__) -> str:
    """Return the raw text of ``sql/<name>.sql``, or of ``<name>.sql`` in another ``package``.

    Another package is a wing's own catalogue (``queue_engine.demo.sql``: the
    reports of ``queue-ctl demo`` and ``bench``, which no engine process sends).
    """
    return resources.files(package).joinpath(f"{name}.sql").read_text(encoding="utf-8")


@cache
def query(name: str, schema: str) -> LiteralString:
    """Return the named statement (``sql/<name>.sql``) for the given schema."""
    return render(source(name), schema)


def plain(name: str) -> LiteralString:
    """Return a statement that names no engine object (no ``__SCHEMA__``): locks, the ledger."""
    return source(name)


def jobs_channel(schema: str) -> str:
    """Return the NOTIFY channel on which new or re-queued jobs announce their queue name."""
    return f"{validate_schema(schema)}.jobs"


def cancel_channel(schema: str) -> str:
    """Return the NOTIFY channel on which a cancel request of a running job announces its id."""
    return f"{validate_schema(schema)}.cancel"


def telemetry_channel(schema: str) -> str:
    """Return the NOTIFY channel on which heartbeats (workers, orchestrators, schedulers) publish host telemetry (JSON)."""
    return f"{validate_schema(schema)}.telemetry"


def lock_key_namespace(schema: str) -> str:
    """Return the prefix of a lock key's advisory-lock text: one key space per engine schema.

    Advisory locks are database-wide, so without the schema two engines in one
    database would block each other's jobs of the same ``lock_key``. For the
    default schema the text is the one earlier versions used, so workers of
    both versions still exclude each other during a rolling upgrade.
    """
    return f"{validate_schema(schema)}.lock_key:"


def controls_channel(schema: str) -> str:
    """Return the NOTIFY channel on which a changed control announces what it touches.

    The payload is a queue name (pause, resume, scale, rate) or ``*`` (a park,
    unpark or stop, which may touch several queues): workers re-read their
    controls when it names their queue or is ``*``.
    """
    return f"{validate_schema(schema)}.controls"
