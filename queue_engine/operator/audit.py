"""The audit of operator controls: who changed what, when, from what to what (migration 0034).

A control is a row that says what holds now (``queues.paused_at``,
``worker_parks``, ``concurrency_limits.set_at``), not who changed it or what
it was before. Every control function of the operator layer
(:mod:`queue_engine.operator.controls`, :mod:`queue_engine.operator.limits`)
therefore calls :func:`record_control` inside its own transaction: the row in
``control_events`` commits with the change or not at all, so a refused or
rolled-back control leaves nothing, and the command line, the HTTP API and
the dashboard, which all call those functions, are audited alike.

Who: an :class:`Actor`, a name and the face it came through (``via``). The
HTTP API and the dashboard pass the signed-in principal's name; ``queue-ctl``
and Python callers pass :func:`local_actor` (``QUEUE_ENGINE_ACTOR``, else
``user@host`` of the OS user). A name is never a token, password or DSN: the
principal's name is the one the web logs already carry.

The controls' names are a documented vocabulary (:data:`CONTROLS`), not a
list in the table's CHECK, so a new control needs no migration: it adds its
name here and calls :func:`record_control` in its transaction, one line.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.foundation.errors import ValidationError

#: Every control the engine records, and what its ``before``/``after`` hold.
CONTROLS: dict[str, str] = {
    "pause": "queue: {paused}",
    "resume": "queue: {paused}",
    "scale": "queue: {scale_limit} (null: no limit)",
    "rate": "queue: {rate_limit, rate_burst} (null: no limit)",
    "park": "host or worker id: {parked, queue, workers}",
    "unpark": 'host or worker id: {parks} (the queues of the parks; "*": all queues)',
    "stop": "host or worker id: after {workers, now}; before {asked}: those already asked",
    "limit_set": "concurrency key: {max_running} (before null: no limit was set)",
    "limit_clear": "concurrency key: before {max_running}, after null",
    "key_rate_set": "concurrency key: {rate, burst} (before null: no rate was set)",
    "key_rate_clear": "concurrency key: before {rate, burst}, after null",
    "partition_weight_set": "queue/partition: {weight} (before null: weight 1)",
    "partition_weight_clear": "queue/partition: before {weight}, after null",
}
#: The faces a control comes through; ``sql`` is for rows an operator writes by hand.
VIAS = ("cli", "api", "dashboard", "library", "sql")
#: The table's CHECK on ``control`` (migrations/0034_control_events.sql).
CONTROL_PATTERN = re.compile(r"^[a-z][a-z_]{0,62}$")
#: Bounds of ``target`` and ``actor`` (the table's CHECKs).
MAX_TARGET_LENGTH = 1000
MAX_ACTOR_LENGTH = 255
#: Most rows one read returns (``--limit``, ``?limit=``).
MAX_ROWS = 1000
DEFAULT_ROWS = 50


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change (a name, never a secret) and through which face."""

    name: str
    via: str = "library"

    def __post_init__(self) -> None:
        if self.via not in VIAS:
            raise ValueError(f"via must be one of {', '.join(VIAS)}, not {self.via!r}")
        if not 1 <= len(self.name) <= MAX_ACTOR_LENGTH:
            raise ValidationError(f"an actor's name is 1 to {MAX_ACTOR_LENGTH} characters")


def local_actor(via: str = "library", environ: Mapping[str, str] | None = None) -> Actor:
    """``QUEUE_ENGINE_ACTOR`` if set, else ``user@host`` of the OS user running this process."""
    name = table.ACTOR.read(environ)
    if name is None:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no passwd entry, no LOGNAME: a bare container
            user = f"uid{os.getuid()}"
        name = f"{user}@{socket.gethostname()}"[:MAX_ACTOR_LENGTH]
    return Actor(name, via)


def record_control(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    control: str,
    target: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    by: Actor | None,
) -> None:
    """Write one ``control_events`` row; call it inside the control's own transaction.

    ``by`` None: :func:`local_actor` (a Python caller of the operator layer).
    """
    actor = by if by is not None else local_actor()
    conn.execute(
        queries.query("control_events_insert", schema),
        {
            "control": control,
            "target": target[:MAX_TARGET_LENGTH],
            "before": None if before is None else Jsonb(dict(before)),
            "after": None if after is None else Jsonb(dict(after)),
            "actor": actor.name,
            "via": actor.via,
        },
    )


@dataclass(frozen=True, slots=True)
class ControlEvent:
    """One recorded control."""

    id: int
    at: datetime
    control: str
    target: str
    before: Any
    after: Any
    actor: str
    via: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``at`` as ISO 8601)."""
        return {
            "id": self.id,
            "at": self.at.isoformat(),
            "control": self.control,
            "target": self.target,
            "before": self.before,
            "after": self.after,
            "actor": self.actor,
            "via": self.via,
        }


def parse_since(value: str, now: datetime) -> datetime:
    """A duration back from ``now`` (``90m``, ``2d``) or a time (ISO 8601; no offset: UTC)."""
    text = value.strip()
    try:
        return now - timedelta(seconds=table.parse_duration(text))
    except (ValueError, OverflowError):  # not a duration, or one reaching before year 1
        pass
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"invalid --since {value!r}: use a duration ({table.DURATION_FORMS}) "
            "or a time (2026-11-28T09:00:00Z)"
        ) from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def check_filters(control: str | None, target: str | None, limit: int) -> None:
    """Refuse a filter no row could match, or a limit out of 1 to :data:`MAX_ROWS`."""
    if control is not None and not CONTROL_PATTERN.match(control):
        raise ValidationError(
            f"invalid control {control!r}: one of {', '.join(CONTROLS)} (lower-case words)"
        )
    if target is not None and not 1 <= len(target) <= MAX_TARGET_LENGTH:
        raise ValidationError(f"a target is 1 to {MAX_TARGET_LENGTH} characters")
    if isinstance(limit, bool) or not 1 <= limit <= MAX_ROWS:
        raise ValidationError(f"invalid limit {limit!r}: use 1 to {MAX_ROWS} rows")


def list_control_events(
    conn: psycopg.Connection[Any],
    schema: str,
    *,
    since: datetime | None = None,
    control: str | None = None,
    target: str | None = None,
    limit: int = DEFAULT_ROWS,
) -> list[ControlEvent]:
    """Recorded controls, newest first, filtered; at most ``limit`` (1 to :data:`MAX_ROWS`)."""
    check_filters(control, target, limit)
    params = {"since": since, "control": control, "target": target, "limit": limit}
    with schema_errors(schema), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.query("control_events_list", schema), params)
        return [ControlEvent(**row) for row in cur.fetchall()]
