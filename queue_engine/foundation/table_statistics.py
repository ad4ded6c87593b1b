"""Planner statistics of the engine's tables: read how stale they are, refresh them.

The worker's hot statements do not depend on statistics (their plans reach
``jobs`` through the primary key or the partial claimable index, see
:func:`queue_engine.worker.store.configure_session`), but every other statement
does, and a cached plan is only re-made when an ``ANALYZE`` or ``VACUUM``
invalidates it. Autovacuum analyzes a table only once per naptime (60 s by
default) at the earliest, and a brand-new table never before its first burst.
So the engine analyzes its tables itself at two moments: after a migration run
that changed the schema (:class:`queue_engine.foundation.migrate.Migrator`), and when the
orchestrator's leader sees a burst (:mod:`queue_engine.orchestrator.analyzer`).
The same counters tell the leader's vacuumer when the claim index has collected
enough dead entries to be worth a ``VACUUM`` (:mod:`queue_engine.orchestrator.vacuumer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

from queue_engine.foundation import sql as queries
from queue_engine.foundation.config import validate_schema


@dataclass(frozen=True, slots=True)
class TableStatistics:
    """How much one table changed since its last ANALYZE (``sql/table_statistics.sql``)."""

    name: str
    changes: int
    estimated_rows: float
    analyzed_at: datetime | None
    #: Dead row versions not yet removed by a VACUUM (``n_dead_tup``).
    dead_rows: int = 0
    #: Manual VACUUMs completed on the table (``vacuum_count``).
    vacuum_count: int = 0

    @property
    def never_analyzed(self) -> bool:
        """True when no ANALYZE (manual or automatic) ever ran on the table."""
        return self.analyzed_at is None


def read(
    conn: psycopg.Connection[Any], schema: str, tables: Sequence[str] | None = None
) -> list[TableStatistics]:
    """Return the change counters of the engine's tables (``tables``: only those)."""
    rows = conn.execute(
        queries.plain("table_statistics"),
        {"schema": validate_schema(schema), "tables": list(tables) if tables else None},
    ).fetchall()
    return [
        TableStatistics(str(r[0]), int(r[1]), float(r[2]), r[3], int(r[4]), int(r[5])) for r in rows
    ]


def analyze(conn: psycopg.Connection[Any], schema: str, table: str) -> None:
    """ANALYZE one table of the engine schema."""
    conn.execute(
        sql.SQL(queries.query("analyze_table", schema)).format(table=sql.Identifier(table))
    )


def vacuum(conn: psycopg.Connection[Any], schema: str, table: str) -> None:
    """VACUUM one table of the engine schema, index pass included, skipped when its lock is taken.

    ``conn`` must be in autocommit mode (VACUUM cannot run in a transaction).
    """
    conn.execute(sql.SQL(queries.query("vacuum_table", schema)).format(table=sql.Identifier(table)))


def analyze_schema(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """ANALYZE every table of the engine schema; return their names."""
    names = [t.name for t in read(conn, schema)]
    for name in names:
        analyze(conn, schema, name)
    return names
