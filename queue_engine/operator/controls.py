"""Operator controls: pause, resume, scale and rate (``queues``), park, unpark and stop.

A control is a row in the database, not a message to running processes: every
worker reads it in its claim statement (one primary-key lookup per claim), so
it takes effect at each worker's next claim, applies to workers started later,
and survives restarts. Resume also NOTIFYs the queue on ``<schema>.jobs`` in
the same transaction, so idle workers claim at once instead of at their next
poll. Pause needs no notification: a worker that is idle is not claiming.

Every control also NOTIFYs ``<schema>.controls`` in its transaction (payload:
the queue name, or ``*`` for a park, unpark or stop, which may touch several
queues), so workers that cache their controls re-read them at once rather than
at their next heartbeat; the claim enforces them either way. Inputs are
validated before anything is written (:class:`ValidationError`, exit 2), and a
park or stop that names no live worker writes nothing (:class:`NoLiveWorker`,
exit 1).

Every control also records itself in the audit of controls
(:func:`~queue_engine.operator.audit.record_control`, one ``control_events``
row in the same transaction): ``by`` says who (None: the local OS user).
Why this module is long: it is the one place each control's validation,
statement and audit row meet, seven controls side by side; split by control,
each module would repeat the same transaction, NOTIFY and audit pattern.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import schema_errors
from queue_engine.foundation.errors import QueueEngineError, ValidationError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.operator.audit import Actor, record_control
from queue_engine.producer.validation import check_queue_name


@dataclass(frozen=True, slots=True)
class PauseResult:
    """What a pause did: since when the queue is paused, and whether it already was."""

    queue: str
    paused_at: datetime
    was_paused: bool


@dataclass(frozen=True, slots=True)
class ResumeResult:
    """What a resume did: whether the queue was paused before."""

    queue: str
    was_paused: bool


def pause_queue(
    conn: psycopg.Connection[Any], schema: str, queue: str, *, by: Actor | None = None
) -> PauseResult:
    """Pause ``queue`` (validated first); idempotent, keeps the first ``paused_at``."""
    check_queue_name(queue)
    with schema_errors(schema), conn.transaction():
        row = conn.execute(
            queries.query("queue_pause", schema),
            {"queue": queue, "controls_channel": queries.controls_channel(schema)},
        ).fetchone()
        assert row is not None  # an upsert always returns its row
        was = {"paused": bool(row[1])}
        record_control(
            conn, schema, control="pause", target=queue, before=was, after={"paused": True}, by=by
        )
    return PauseResult(queue, row[0], bool(row[1]))


def resume_queue(
    conn: psycopg.Connection[Any], schema: str, queue: str, *, by: Actor | None = None
) -> ResumeResult:
    """Resume ``queue`` (validated first) and wake its idle workers; idempotent."""
    check_queue_name(queue)
    params = {
        "queue": queue,
        "jobs_channel": queries.jobs_channel(schema),
        "controls_channel": queries.controls_channel(schema),
    }
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("queue_resume", schema), params).fetchone()
        assert row is not None
        was = {"paused": bool(row[0])}
        record_control(
            conn, schema, control="resume", target=queue, before=was, after={"paused": False}, by=by
        )
    return ResumeResult(queue, bool(row[0]))


# -- fleet controls: scale, rate, park, unpark, stop ------------------------------

#: The word that clears a scale or rate limit (``queue-ctl scale Q off``).
OFF = "off"
#: Bounds of the ``queues`` CHECK constraints (migrations/0004_fleet_controls.sql),
#: checked here first so a bad value gets a sentence, not a constraint name.
SCALE_RANGE = (0, 10_000)
RATE_MAX = 100_000.0
BURST_RANGE = (1, 100_000)
#: ``worker_parks.host`` is 1-255 characters (``worker_parks_host_check``).
MAX_HOST_LENGTH = 255
MAX_WORKER_ID_LENGTH = 255


class NoLiveWorker(QueueEngineError):
    """A park or stop named workers, and no live worker matches: exit 1, nothing written."""

    exit_code = ExitCode.FAILURE


def parse_scale(value: str | int | None) -> int | None:
    """``N`` (0-10000) as an int, ``off`` as None (no limit); anything else is refused.

    Accepts an int from library callers, a string from the command line: the
    command line is where a typo happens, so the message names the one spelling
    of "no limit".
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == OFF):
        return None
    low, high = SCALE_RANGE
    limit: int | None = None
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        limit = int(value.strip())
    elif isinstance(value, int) and not isinstance(value, bool):
        limit = value
    if limit is None or not low <= limit <= high:
        raise ValidationError(
            f"invalid scale {value!r}: use a whole number of workers from {low} to {high}, "
            f"or `{OFF}` for no limit"
        )
    return limit


def parse_rate(value: str | float | None) -> float | None:
    """``R`` jobs/second (0 < R <= 100000) as a float, ``off`` as None (no limit)."""
    if value is None or (isinstance(value, str) and value.strip().lower() == OFF):
        return None
    try:
        rate = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        rate = math.nan
    # NaN fails both comparisons; inf fails the upper bound.
    if isinstance(value, bool) or not (0 < rate <= RATE_MAX):
        raise ValidationError(
            f"invalid rate {value!r}: use jobs per second, more than 0 and at most "
            f"{RATE_MAX:g} (e.g. 2.5), or `{OFF}` for no limit"
        )
    return rate


def check_burst(burst: int) -> int:
    """A burst is a whole number of jobs from 1 to 100000."""
    low, high = BURST_RANGE
    if isinstance(burst, bool) or not isinstance(burst, int) or not low <= burst <= high:
        raise ValidationError(
            f"invalid burst {burst!r}: use a whole number of jobs from {low} to {high}"
        )
    return burst


def _check_text(kind: str, value: str, max_length: int) -> str:
    # Hosts and worker ids are compared exactly: whitespace or control characters
    # are always a copy-paste accident, and would make a park that matches nothing.
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= max_length
        or any(ch.isspace() or not ch.isprintable() for ch in value)
    ):
        raise ValidationError(
            f"invalid {kind} {value!r}: use 1-{max_length} printable characters without spaces"
        )
    return value


@dataclass(frozen=True, slots=True)
class FleetTarget:
    """Which workers a park, unpark or stop is about: a host (one queue or all) or one worker.

    Validated when built, so a target that exists is a valid one: exactly one
    of a host (with an optional queue) or a worker id. A queue alone is refused
    rather than read as "every worker of the queue": that is what ``pause`` and
    ``scale QUEUE 0`` are for, and they hold for the queue's future workers too,
    which a park by queue alone would not say.
    """

    host: str | None = None
    queue: str | None = None
    worker_id: str | None = None

    def __post_init__(self) -> None:
        host, queue, worker_id = self.host, self.queue, self.worker_id
        if host is not None and worker_id is not None:
            raise ValidationError("give either --host or --worker, not both")
        if worker_id is not None:
            if queue is not None:
                raise ValidationError(
                    "--queue goes with --host, not with --worker (a worker serves one queue)"
                )
            _check_text("worker id", worker_id, MAX_WORKER_ID_LENGTH)
            return
        if host is None:
            if queue is not None:
                raise ValidationError(
                    f"--queue needs --host: to stop every worker of queue {queue} from "
                    f"claiming, use `queue-ctl pause {queue}` or `queue-ctl scale {queue} 0`"
                )
            raise ValidationError("say which workers: --host HOST [--queue QUEUE], or --worker ID")
        _check_text("host", host, MAX_HOST_LENGTH)
        if queue is not None:
            check_queue_name(queue)

    def describe(self) -> str:
        """``host H``, ``host H, queue Q`` or ``worker ID``, for messages."""
        if self.worker_id is not None:
            return f"worker {self.worker_id}"
        if self.queue is not None:
            return f"host {self.host}, queue {self.queue}"
        return f"host {self.host} (all queues)"


@dataclass(frozen=True, slots=True)
class ScaleResult:
    """What a scale did: the limit before and after (None: no limit)."""

    queue: str
    previous: int | None
    limit: int | None
    woken: bool

    @property
    def changed(self) -> bool:
        """False when the queue already had this limit."""
        return self.previous != self.limit


@dataclass(frozen=True, slots=True)
class RateResult:
    """What a rate did: rate and burst before and after (None: no limit)."""

    queue: str
    previous_rate: float | None
    previous_burst: int | None
    rate: float | None
    burst: int | None

    @property
    def changed(self) -> bool:
        """False when the queue already had this rate and burst (its bucket was kept)."""
        return (self.previous_rate, self.previous_burst) != (self.rate, self.burst)


@dataclass(frozen=True, slots=True)
class ParkResult:
    """What a park did, since when it holds, and the live workers it matches now."""

    target: FleetTarget
    created: bool
    parked_at: datetime
    worker_ids: list[str]
    #: A per-queue host park whose host already has an all-queue park.
    covered_by_host_park: bool = False
    #: For a worker park: the worker's host and queue.
    host: str | None = None
    queue: str | None = None


@dataclass(frozen=True, slots=True)
class UnparkResult:
    """What an unpark removed and what still parks the same workers."""

    target: FleetTarget
    #: Queues of the removed host parks (None: the all-queue park); for a worker, [None].
    removed: list[str | None]
    #: A per-queue unpark: since when the host's all-queue park still holds (None: none).
    host_parked_at: datetime | None = None
    #: Live workers on the host still parked by their own id.
    parked_worker_ids: list[str] = field(default_factory=list)
    #: A worker unpark: the host parks that still hold for it ("*": all queues).
    host_parks: list[str] = field(default_factory=list)
    host: str | None = None


@dataclass(frozen=True, slots=True)
class StopRequest:
    """One worker asked to stop, and whether it had been asked before."""

    worker_id: str
    host: str
    queue: str | None
    stop_requested_at: datetime
    already: bool
    #: A hard stop (``stop --now``): the running job is given back at once.
    now: bool = False


def _audit_target(target: FleetTarget) -> str:
    """A park's, unpark's or stop's target in the audit: the worker id, else the host."""
    return target.worker_id if target.worker_id is not None else str(target.host)


def scale_queue(
    conn: psycopg.Connection[Any],
    schema: str,
    queue: str,
    limit: str | int | None,
    *,
    by: Actor | None = None,
) -> ScaleResult:
    """Let at most ``limit`` workers of ``queue`` claim (None/``off``: no limit); idempotent."""
    check_queue_name(queue)
    value = parse_scale(limit)
    params = {
        "queue": queue,
        "limit": value,
        "controls_channel": queries.controls_channel(schema),
        "jobs_channel": queries.jobs_channel(schema),
    }
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("queue_scale", schema), params).fetchone()
        assert row is not None  # the statement always returns one row
        before, after = {"scale_limit": row[0]}, {"scale_limit": value}
        record_control(
            conn, schema, control="scale", target=queue, before=before, after=after, by=by
        )
    return ScaleResult(queue, row[0], value, bool(row[2]))


def rate_queue(
    conn: psycopg.Connection[Any],
    schema: str,
    queue: str,
    rate: str | float | None,
    *,
    burst: int | None = None,
    by: Actor | None = None,
) -> RateResult:
    """Start at most ``rate`` jobs/s of ``queue``, bursts of ``burst`` (None/``off``: no limit)."""
    check_queue_name(queue)
    value = parse_rate(rate)
    if value is None and burst is not None:
        raise ValidationError(f"--burst goes with a rate, not with `{OFF}`")
    size = check_burst(1 if burst is None else burst)
    params = {
        "queue": queue,
        "rate": value,
        "burst": size,
        "controls_channel": queries.controls_channel(schema),
        "jobs_channel": queries.jobs_channel(schema),
    }
    with schema_errors(schema), conn.transaction():
        row = conn.execute(queries.query("queue_rate", schema), params).fetchone()
        assert row is not None
        result = RateResult(queue, row[0], row[1], value, size if value is not None else None)
        before = {"rate_limit": result.previous_rate, "rate_burst": result.previous_burst}
        after = {"rate_limit": result.rate, "rate_burst": result.burst}
        record_control(
            conn, schema, control="rate", target=queue, before=before, after=after, by=by
        )
    return result


def park(
    conn: psycopg.Connection[Any], schema: str, target: FleetTarget, *, by: Actor | None = None
) -> ParkResult:
    """Park a host's workers (now and later) or one live worker; idempotent.

    A worker park of an id that is not a live worker raises :class:`NoLiveWorker`
    and writes nothing: a typo must not leave a row that parks nobody.
    """
    channel = queries.controls_channel(schema)
    with schema_errors(schema), conn.transaction():
        if target.worker_id is not None:
            row = conn.execute(
                queries.query("park_worker", schema),
                {"worker_id": target.worker_id, "controls_channel": channel},
            ).fetchone()
            if row is None:
                raise NoLiveWorker(f"no live worker with id {target.worker_id!r}")
            result = ParkResult(
                target, bool(row[2]), row[3], [target.worker_id], host=row[0], queue=row[1]
            )
        else:
            row = conn.execute(
                queries.query("park_host", schema),
                {"host": target.host, "queue": target.queue, "controls_channel": channel},
            ).fetchone()
            assert row is not None
            result = ParkResult(
                target, bool(row[0]), row[1], list(row[3]), covered_by_host_park=bool(row[2])
            )
        record_control(
            conn,
            schema,
            control="park",
            target=_audit_target(target),
            before={"parked": not result.created, "queue": target.queue},
            after={"parked": True, "queue": target.queue, "workers": result.worker_ids},
            by=by,
        )
    return result


def unpark(
    conn: psycopg.Connection[Any], schema: str, target: FleetTarget, *, by: Actor | None = None
) -> UnparkResult:
    """Remove the park(s) of a host (one queue or every park of the host) or of one worker.

    Idempotent: removing a park that is not there changes nothing and says so.
    An unknown worker id raises :class:`NoLiveWorker` (a typo, most likely).
    """
    channel = queries.controls_channel(schema)
    with schema_errors(schema), conn.transaction():
        if target.worker_id is not None:
            row = conn.execute(
                queries.query("unpark_worker", schema),
                {"worker_id": target.worker_id, "controls_channel": channel},
            ).fetchone()
            assert row is not None
            if not row[0] and not row[2]:
                raise NoLiveWorker(f"no worker with id {target.worker_id!r}")
            result = UnparkResult(
                target, [None] * int(row[2]), host_parks=list(row[3]), host=row[1]
            )
        else:
            row = conn.execute(
                queries.query("unpark_host", schema),
                {"host": target.host, "queue": target.queue, "controls_channel": channel},
            ).fetchone()
            assert row is not None
            result = UnparkResult(
                target, list(row[1]), host_parked_at=row[2], parked_worker_ids=list(row[3])
            )
        removed = ["*" if q is None else q for q in result.removed]
        record_control(
            conn,
            schema,
            control="unpark",
            target=_audit_target(target),
            before={"parks": removed},
            after={"parks": []},
            by=by,
        )
    return result


def stop_workers(
    conn: psycopg.Connection[Any],
    schema: str,
    target: FleetTarget,
    *,
    now: bool = False,
    by: Actor | None = None,
) -> list[StopRequest]:
    """Ask the live workers matching ``target`` to stop after their current job.

    ``now`` (``stop --now``): a busy worker gives its running job back to the
    queue at its next heartbeat (attempt not counted) instead of finishing it,
    and exits 0 all the same. A ``--now`` after a plain stop upgrades it; a
    plain stop after a ``--now`` one changes nothing.

    One-shot: workers started later are not affected. Raises :class:`NoLiveWorker`
    (nothing written, nothing NOTIFYed) when no live worker matches.
    """
    params = {
        "worker_id": target.worker_id,
        "host": target.host,
        "queue": target.queue,
        "now": now,
        "controls_channel": queries.controls_channel(schema),
    }
    with schema_errors(schema), conn.transaction():
        rows = conn.execute(queries.query("stop_workers", schema), params).fetchall()
        if rows:  # none: NoLiveWorker below, and nothing was written
            record_control(
                conn,
                schema,
                control="stop",
                target=_audit_target(target),
                before={"asked": [r[0] for r in rows if r[3] is not None]},
                after={"workers": [r[0] for r in rows], "queue": target.queue, "now": now},
                by=by,
            )
    if not rows:
        what = (
            f"with id {target.worker_id!r}"
            if target.worker_id is not None
            else f"on {target.describe()}"
        )
        raise NoLiveWorker(f"no live worker {what}")
    return [
        StopRequest(r[0], r[1], r[2], r[4], r[3] is not None and (r[7] or not now), now=r[6])
        for r in rows
    ]


# -- the controls view -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueControl:
    """A queue with a control in force (paused, scale limit, rate limit)."""

    queue: str
    paused: bool
    paused_at: datetime | None
    scale_limit: int | None
    rate_limit: float | None
    rate_burst: int | None
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Park:
    """One park: a host (queue None: all queues) or one worker (with its host and queue)."""

    id: int
    kind: str
    host: str | None
    queue: str | None
    worker_id: str | None
    parked_at: datetime
    live_workers: int


@dataclass(frozen=True, slots=True)
class PendingStop:
    """A worker asked to stop that has not stopped yet."""

    worker_id: str
    host: str
    queue: str | None
    state: str
    stop_requested_at: datetime
    #: A hard stop (``stop --now``): the running job is given back at once.
    stop_now: bool = False


@dataclass(frozen=True, slots=True)
class Controls:
    """Every control in force: queue controls, parks and pending stop requests."""

    queues: list[QueueControl]
    parks: list[Park]
    stops: list[PendingStop]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (datetimes as ISO 8601)."""

        def plain(item: Any) -> dict[str, Any]:
            return {
                k: (v.isoformat() if isinstance(v, datetime) else v)
                for k, v in asdict(item).items()
            }

        return {
            "queues": [plain(q) for q in self.queues],
            "parks": [plain(p) for p in self.parks],
            "stops": [plain(s) for s in self.stops],
        }


def controls(conn: psycopg.Connection[Any], schema: str) -> Controls:
    """Read every control in force: three short reads in one transaction."""
    with (
        schema_errors(schema),
        conn.transaction(),
        conn.cursor(row_factory=dict_row) as cur,
    ):
        cur.execute(queries.query("controls_queues", schema))
        queues = [QueueControl(**r) for r in cur.fetchall()]
        cur.execute(queries.query("controls_parks", schema))
        parks = [Park(**r) for r in cur.fetchall()]
        cur.execute(queries.query("controls_stops", schema))
        stops = [PendingStop(**r) for r in cur.fetchall()]
    return Controls(queues, parks, stops)
