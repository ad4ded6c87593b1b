"""Per-key limits set by operators (``queue-ctl limits``; migrations 0031, 0033).

A job with a ``concurrency_key`` is claimed only while fewer than its key's
limit run (docs/internals/flow-control.md). The limit is the job's own
``concurrency_limit`` unless an operator set one for the key here: the
operator's wins, so a limit is tightened (or a key held, with 0) during an
incident without re-enqueuing anything. The claim reads the table on every
run, so a change holds from the next claim on, on every worker, with no
NOTIFY; jobs already running go on. Each change is recorded in the audit of
controls (``limit_set``, ``limit_clear``, ``key_rate_set``, ``key_rate_clear``:
:mod:`queue_engine.operator.audit`) in its own transaction.

A key may also have a rate (migration 0033): a token bucket of ``rate``
tokens a second up to ``burst``, from which each job of the key takes its
``weight`` (default 1) when it is claimed. The claim skips a job whose
tokens are not there yet, exactly as a job over its key's limit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.foundation.errors import QueueEngineError, ValidationError
from queue_engine.operator.audit import Actor, record_control
from queue_engine.operator.controls import RATE_MAX, check_burst
from queue_engine.operator.flow import MAX_ROWS, KeyFlow, key_flows
from queue_engine.producer.validation import MAX_KEY_LENGTH, check_concurrency_key

#: The limits an operator may set: 0 holds the key (none of its jobs starts).
LIMIT_RANGE = (0, 10_000)


@dataclass(frozen=True, slots=True)
class LimitSet:
    """What ``limits set`` did: the key, its new and previous limit, its running jobs now."""

    key: str
    max_running: int
    previous: int | None
    running: int


@dataclass(frozen=True, slots=True)
class RateSet:
    """What ``limits set --rate`` did: the key's new and previous rate (per second) and burst."""

    key: str
    rate: float
    burst: int
    previous_rate: float | None
    previous_burst: int | None


def parse_limit(value: str | int) -> int:
    """A limit is a whole number of running jobs, 0 to 10000."""
    low, high = LIMIT_RANGE
    try:
        number = value if isinstance(value, int) else int(str(value).strip(), 10)
    except ValueError:
        number = None
    if isinstance(number, bool) or number is None or not low <= number <= high:
        raise ValidationError(
            f"invalid limit {value!r}: use a whole number of running jobs from {low} to {high}"
        )
    return number


#: ``R``, ``R/s`` or ``R/min`` (R a positive decimal number).
_RATE = re.compile(r"(?P<n>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?:/\s*(?P<unit>s|sec|min|m))?")


def parse_key_rate(value: str | float) -> float:
    """A key's rate as tokens a second: ``20``, ``20/s``, ``600/min`` (more than 0, at most 100000/s)."""
    text = str(value).strip().lower()
    match = _RATE.fullmatch(text)
    rate = math.nan
    if match is not None and not isinstance(value, bool):
        rate = float(match["n"]) / (60.0 if match["unit"] in ("min", "m") else 1.0)
    if not 0 < rate <= RATE_MAX:  # NaN fails it too
        raise ValidationError(
            f"invalid rate {value!r}: use tokens per second or per minute, e.g. 20/s or "
            f"600/min (more than 0, at most {RATE_MAX:g}/s)"
        )
    return rate


def default_burst(rate: float) -> int:
    """The burst when none is given: one second's tokens (at least 1)."""
    return max(1, math.ceil(rate))


def parse_burst(value: str | int) -> int:
    """A bucket's burst: a whole number of tokens from 1 to 100000."""
    try:
        number = value if isinstance(value, int) else int(str(value).strip(), 10)
    except ValueError:
        raise ValidationError(
            f"invalid burst {value!r}: use a whole number of tokens from 1 to 100000"
        ) from None
    return check_burst(number)


def check_key(key: str) -> str:
    """A concurrency key as the jobs carry it (1 to 255 characters of text)."""
    checked = check_concurrency_key(key)
    if checked is None:
        raise ValidationError(f"a concurrency key is 1 to {MAX_KEY_LENGTH} characters")
    return checked


def set_limit(
    conn: psycopg.Connection[Any],
    schema: str,
    key: str,
    limit: str | int,
    *,
    by: Actor | None = None,
) -> LimitSet:
    """At most ``limit`` jobs of ``key`` run at once from the next claim on; idempotent."""
    key, value = check_key(key), parse_limit(limit)
    with schema_errors(schema), conn.transaction():
        row = conn.execute(
            queries.query("limits_set", schema), {"key": key, "max_running": value}
        ).fetchone()
        assert row is not None
        before = None if row[0] is None else {"max_running": row[0]}
        after = {"max_running": value}
        record_control(
            conn, schema, control="limit_set", target=key, before=before, after=after, by=by
        )
    return LimitSet(key, value, row[0], int(row[1]))


class LimitNotFound(QueueEngineError, LookupError):
    """The key has no operator's limit (nothing to clear or show)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no limit is set for concurrency key {key!r}")
        self.key = key


def set_rate(
    conn: psycopg.Connection[Any],
    schema: str,
    key: str,
    rate: str | float,
    burst: int | None,
    *,
    by: Actor | None = None,
) -> RateSet:
    """Jobs of ``key`` start at most ``rate`` a second (``burst`` at once) from the next claim on."""
    key, value = check_key(key), parse_key_rate(rate)
    size = default_burst(value) if burst is None else check_burst(burst)
    with schema_errors(schema), conn.transaction():
        row = conn.execute(
            queries.query("limits_rate_set", schema), {"key": key, "rate": value, "burst": size}
        ).fetchone()
        assert row is not None
        before = None if row[0] is None else {"rate": float(row[0]), "burst": int(row[1])}
        record_control(
            conn,
            schema,
            control="key_rate_set",
            target=key,
            before=before,
            after={"rate": value, "burst": size},
            by=by,
        )
    return RateSet(key, value, size, row[0], row[1])


def clear_rate(
    conn: psycopg.Connection[Any], schema: str, key: str, *, by: Actor | None = None
) -> tuple[float, int] | None:
    """Remove ``key``'s rate; return the rate and burst removed (None: it had none).

    A key without a rate changes nothing and records nothing.
    """
    key = check_key(key)
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("limits_rate_clear", schema), {"key": key}).fetchone()
        if row is not None:
            record_control(
                conn,
                schema,
                control="key_rate_clear",
                target=key,
                before={"rate": float(row[0]), "burst": int(row[1])},
                after=None,
                by=by,
            )
    return None if row is None else (float(row[0]), int(row[1]))


def clear_limit(
    conn: psycopg.Connection[Any], schema: str, key: str, *, by: Actor | None = None
) -> int | None:
    """Remove the operator's limit of ``key``; return it (None: the key had none).

    A key without a limit changes nothing and records nothing (the API answers 404).
    """
    key = check_key(key)
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("limits_clear", schema), {"key": key}).fetchone()
        if row is not None:
            before = {"max_running": int(row[0])}
            record_control(
                conn, schema, control="limit_clear", target=key, before=before, after=None, by=by
            )
    return None if row is None else int(row[0])


def list_limits(
    conn: psycopg.Connection[Any], schema: str, *, key: str | None = None
) -> list[KeyFlow]:
    """The operators' limits (or ``key``'s), by key, with running and waiting jobs now.

    Bounded like every flow figure (:mod:`queue_engine.operator.flow`): at
    most :data:`~queue_engine.operator.flow.MAX_ROWS` keys.
    """
    return key_flows(
        conn,
        schema,
        key=None if key is None else check_key(key),
        with_running=False,
        busiest=False,
        limit=MAX_ROWS,
    )
