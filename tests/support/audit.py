"""The rows of the audit of controls (``control_events``, migration 0034), as tests compare them."""

from __future__ import annotations

from typing import Any

import psycopg


def audit_rows(
    conn: psycopg.Connection[Any], schema: str = "queue_engine"
) -> list[tuple[Any, ...]]:
    """Every recorded control, oldest first: (control, target, before, after, actor, via)."""
    return conn.execute(
        f"SELECT control, target, before, after, actor, via FROM {schema}.control_events "
        "ORDER BY id"
    ).fetchall()
