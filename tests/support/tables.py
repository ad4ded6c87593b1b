"""Reading an engine table's storage options in tests (what migrations set with ALTER TABLE ... SET)."""

from __future__ import annotations

import psycopg


def table_options(dsn: str, table: str = "jobs") -> dict[str, str]:
    """``queue_engine.<table>``'s options as ``pg_class.reloptions`` spells them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = %s::regclass",
            (f"queue_engine.{table}",),
        ).fetchone()
    assert row is not None
    return dict(str(option).split("=", 1) for option in row[0])
