"""The old systems' databases the importer tests read: their schemas and a checksum.

``tests/fixtures/legacy/<system>.sql`` holds each system's DDL (pqrun's as
its design document gives it; dataloader's and queue_workflows' built from
their descriptions, the assumptions in each file's header). A test loads one
into a fresh database of the test server (the ``empty_dsn`` fixture), fills
it with rows in every state, and compares :func:`checksum` before and after
an import: the importer must never write the source.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
from psycopg import sql

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "legacy"


def create_legacy_schema(dsn: str, system: str) -> None:
    """Run ``system``'s DDL in the database at ``dsn``."""
    text = (FIXTURES / f"{system}.sql").read_text(encoding="utf-8")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL(text))  # type: ignore[arg-type]


def checksum(dsn: str) -> dict[str, str]:
    """Every table of schema public with an md5 of all its rows (in a fixed order)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        out = {}
        for table in tables:
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*) || ':' || coalesce(md5(string_agg(t::text, '|' "
                    "ORDER BY t::text)), '') FROM {} t"
                ).format(sql.Identifier(table))
            ).fetchone()
            assert row is not None
            out[table] = str(row[0])
        return out
