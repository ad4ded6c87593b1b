"""The worker's statements, one function each, on the worker's single connection.

Why this module is long: it is the worker's whole SQL surface. Most
of it is the finish-and-claim statement: which of its variants a batch sends
(warm or cold, follow-ups, hand-over, solo, the one-job forms), its
parameters, and its rows read back. The variants are compiled from
``finish_and_claim_jobs.sql`` by :mod:`queue_engine.foundation.sql.compiler`; the choice
stays here, beside the outcomes it is made from.

Every function runs one named query (``queue_engine/foundation/sql``) as a prepared
statement: the worker runs the same few statements thousands of times, so
parsing and planning them once per connection is a measurable saving.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import set_json_loads

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import raw_cursor
from queue_engine.foundation.sql.compiler import RawStatement, raw_statement
from queue_engine.producer.context import ClaimedJob
from queue_engine.worker import prepared
from queue_engine.worker.outcomes import Outcome
from queue_engine.worker.settings import DEFAULT_AFFINITY_WAIT_S

Connection = psycopg.Connection[Any]


@dataclass(slots=True)
class FinishClaimResult:
    """What a finish-and-claim statement did: the finishes that matched, the jobs claimed."""

    finished: dict[int, str] = field(default_factory=dict)
    claimed: list[ClaimedJob] = field(default_factory=list)
    throttled: bool = False
    #: Sent as the ``solo`` variant (no claim of its own): when it handed
    #: nothing over, the caller claims with the usual statement at once.
    solo: bool = False


def outcomes_json(outcomes: Sequence[Outcome]) -> str:
    """Encode outcomes as the JSON array the finish statement reads (``jsonb_to_recordset``).

    One text parameter costs far less to send and parse than one array per
    column. ``result`` and ``progress`` are already JSON text and are embedded
    as they are.
    """
    # No function call per outcome for the usual values (a known status and
    # kind, no error, no message): a batch of 100 encodes 100 of them.
    word, dumps = _WORDS, json.dumps
    items = [
        f'{{"id":{o.job_id},"attempt":{o.attempt},"status":{word[o.status]},'
        f'"kind":{word[o.kind]},"result":{o.result or "null"},'
        f'"error":{"null" if o.error is None else dumps(o.error)},'
        f'"delay_s":{float(o.delay_s)!r},"refund":{o.refund},'
        f'"duration_ms":{"null" if o.duration_ms is None else int(o.duration_ms)},'
        f'"progress":{o.progress or "null"},'
        f'"message":{"null" if o.message is None else dumps(o.message)}}}'
        for o in outcomes
    ]
    return "[" + ",".join(items) + "]"


class _Words(dict[str, str]):
    """JSON text of the few words an outcome's status and kind take, encoded once."""

    def __missing__(self, value: str) -> str:
        encoded = json.dumps(value)
        if len(self) < 64:  # statuses and kinds are a fixed set; never grows past it
            self[value] = encoded
        return encoded


_WORDS = _Words()


def followups_json(outcomes: Sequence[Outcome]) -> str | None:
    """The follow-ups of ``outcomes`` as one JSON array, or None when none carries any.

    Only successes carry follow-ups (already encoded, :mod:`queue_engine.producer.followups`);
    the statement still inserts them only for the successes it applies.
    """
    items = [text for o in outcomes if o.followups for text in o.followups]
    return "[" + ",".join(items) + "]" if items else None


def execute_raw(
    conn: Connection, statement: RawStatement, params: dict[str, Any]
) -> psycopg.Cursor[Any]:
    """Run ``statement`` as a prepared statement on a raw cursor: no client-side query conversion.

    psycopg converts ``%(name)s`` placeholders on every execute and caches
    the conversion only for texts under 4 kB; the finish-and-claim
    statement is longer, and converting it cost about 27 us a job. A raw
    cursor sends the ``$n`` text as it is.
    """
    return raw_cursor(conn).execute(
        statement.text, [params[name] for name in statement.names], prepare=True
    )


def raw_rows(
    conn: Connection, statement: RawStatement, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """Run ``statement`` as a prepared statement straight through libpq; return the rows.

    The worker's finish-and-claim statement, once per job, goes this way:
    without a cursor it costs the worker a quarter less CPU
    (:mod:`queue_engine.worker.prepared`). On a connection that is not in
    autocommit mode (a caller's own transaction: tests, benches) it goes
    through the cursor, which opens the transaction as psycopg does.
    """
    if not conn.autocommit:
        return execute_raw(conn, statement, params).fetchall()
    return prepared.fetch_rows(conn, statement.text, [params[name] for name in statement.names])


#: The jobs channel of a schema (validated once, not on every job).
_jobs_channel = cache(queries.jobs_channel)


def configure_session(conn: Connection, *, synchronous_commit: str) -> None:
    """Set the worker session's settings: commit durability and how its statements are planned.

    ``plan_cache_mode = force_generic_plan``: the worker runs the same few
    statements thousands of times with parameters that do not change their
    best plan (one queue, a handful of ids), so each is planned once per
    connection instead of on every job, which Postgres' "auto" mode kept doing.

    ``enable_seqscan = off``: every statement the worker runs reaches ``jobs``
    by the primary key or the partial claimable index, and a plan made once
    must stay right while the table grows. A worker that starts on an empty
    (or never analyzed) table would otherwise keep, until the next ANALYZE or
    VACUUM invalidates it, a plan that scans the whole table for each job:
    the planner believes the new table holds ten pages. Disabled, a sequential
    scan is used only where no index can serve (the tiny control tables), so
    the plans no longer depend on statistics (bench/plans/cold_start.md).
    """
    conn.execute(sql.SQL("SET synchronous_commit = {}").format(sql.Literal(synchronous_commit)))
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute("SET enable_seqscan = off")
    set_json_loads(json_loads, conn)


_decode_json = json.JSONDecoder().decode


def json_loads(data: str | bytes) -> Any:
    """``json.loads`` for the worker's connection: a claimed job's ``args`` are decoded per job.

    The server sends ``jsonb`` as UTF-8 text; ``json.loads`` of bytes first
    sniffs the encoding, and most jobs of a busy queue carry ``{}`` (a fresh
    dict each, as a handler may change its args).
    """
    if data == b"{}":
        return {}
    return _decode_json(data if isinstance(data, str) else data.decode())


@dataclass(frozen=True, slots=True)
class ClaimGate:
    """What the worker passes the claim's gate: who and where it is, its scale slot, warm key."""

    host: str
    slot: int | None = None
    warm_key: str | None = None
    affinity_wait_s: float = DEFAULT_AFFINITY_WAIT_S


def size_tags(outcomes: int, claim_limit: int, *, warm: bool) -> tuple[str, ...]:
    """The statement's tags that a batch's size chooses (``finish_and_claim_jobs.sql``).

    ``claimonly``: nothing to finish. ``onefinish``: one outcome.
    ``oneclaim``: a claim of one job without a warm key, whose ``pick`` has
    nothing to rank. A prefetch-1 worker's statement at steady state is
    ``onefinish`` and ``oneclaim`` (:func:`worker_tags` adds ``cold`` or ``warm``).
    """
    tags: list[str] = []
    if outcomes == 0 and claim_limit > 0:
        tags.append("claimonly")
    if outcomes == 1:
        tags.append("onefinish")
    if claim_limit == 1 and not warm:
        tags.append("oneclaim")
    return tuple(tags)


def worker_tags(outcomes: int, claim_limit: int, warm_key: str | None = None) -> tuple[str, ...]:
    """The tags of the statement a worker sends for a batch of this size, before
    ``followups`` and ``handover``: ``cold`` or ``warm``, then :func:`size_tags`.

    ``worker_tags(1, 1)`` is a prefetch-1 worker's statement at steady state;
    the benches and tests take the worker's statement from here.
    """
    return (
        "cold" if warm_key is None else "warm",
        *size_tags(outcomes, claim_limit, warm=warm_key is not None),
    )


def statement_params(
    schema: str,
    *,
    worker_id: str,
    queue: str,
    outcomes: Sequence[Outcome],
    claim_limit: int,
    lease_ttl_s: int,
    gate: ClaimGate,
) -> dict[str, Any]:
    """The finish-and-claim statement's parameters by name (every variant's; each sends its own)."""
    return {
        "outcomes": outcomes_json(outcomes),
        "worker_id": worker_id,
        "queue": queue,
        "claim_limit": claim_limit,
        "lease_ttl_s": lease_ttl_s,
        "jobs_channel": _jobs_channel(schema),
        "host": gate.host,
        "slot": gate.slot,
        "warm_key": gate.warm_key,
        "affinity_wait_s": gate.affinity_wait_s,
    }


def solo_handover(outcomes: Sequence[Outcome], claim_limit: int, warm_key: str | None) -> bool:
    """Whether to send the ``solo`` variant: the hand-over without the claim.

    A job that was itself handed over is most likely a link of a chain, whose
    success hands its own child over in turn. For it the worker sends the
    finish with the hand-over and without the claim's CTEs: Postgres
    initialises every node of a generic plan on every execution, and the
    claim's (its index scan, the lock-key rank, the rate limit, the UPDATE and
    its event) were about a tenth of a chain node's statement although a
    hand-over fills the one-job claim (bench/runs/2026-11-27-log.md, "workflow_cost.py").
    When that statement hands nothing over (the chain's last node, a child
    still waiting for another parent), the caller claims at once with the
    usual statement (``FinishClaimResult.solo``, ``Flusher.flush``): one more
    round trip, for that job only.
    Only a one-job claim by a worker without a warm key qualifies.
    """
    return (
        claim_limit == 1
        and warm_key is None
        and any(o.handed_over and o.status == "succeeded" for o in outcomes)
    )


def finish_and_claim(
    conn: Connection,
    schema: str,
    *,
    worker_id: str,
    queue: str,
    outcomes: Sequence[Outcome] = (),
    claim_limit: int = 0,
    lease_ttl_s: int = 60,
    gate: ClaimGate | None = None,
    handover: bool = True,
) -> FinishClaimResult:
    """Apply ``outcomes`` (guarded) and claim up to ``claim_limit`` jobs, in one statement.

    An outcome whose job is no longer this worker's running attempt changes
    nothing and is simply absent from ``finished``. The claim takes only what
    the operator controls allow (``gate``, see ``finish_and_claim_jobs.sql``);
    ``throttled`` says the queue's rate limit withheld due jobs. May raise
    ``UniqueViolation`` when another worker claimed a job of the same lock key
    at the same moment: then nothing was applied (see :func:`finish_only`).

    Outcomes carrying follow-ups (``ctx.enqueue``) are sent with the
    ``followups`` variant, which inserts them for the successes it applies; a
    batch without any sends the statement that does not mention them. A batch
    with a workflow node's success is sent with the ``handover`` variant (when
    ``handover``: the worker's policy, worker/handover.py), which may claim
    that node's child straight from ``waiting``; plain jobs never pay for it.
    A claim with nothing to finish (after an idle wait) is sent without the
    finish's parts (``claimonly``): the claim that sets an idle worker's wake
    latency does not initialise an UPDATE and an INSERT that get no row. One
    outcome (``onefinish``) and a one-job claim without a warm key
    (``oneclaim``), a prefetch-1 worker's every statement, leave out the plan
    nodes that only a batch needs.
    """
    if gate is None:
        gate = ClaimGate(host=socket.gethostname())
    params = statement_params(
        schema,
        worker_id=worker_id,
        queue=queue,
        outcomes=outcomes,
        claim_limit=claim_limit,
        lease_ttl_s=lease_ttl_s,
        gate=gate,
    )
    variant = list(worker_tags(len(outcomes), claim_limit, gate.warm_key))
    followups = followups_json(outcomes)
    if followups is not None:
        params["followups"] = followups
        variant.append("followups")
    if (
        handover
        and claim_limit > 0
        and any(o.workflow_id is not None and o.status == "succeeded" for o in outcomes)
    ):
        variant.append("handover")
        if solo_handover(outcomes, claim_limit, gate.warm_key):
            variant.append("solo")
    statement = raw_statement("finish_and_claim_jobs", schema, tuple(variant))
    rows = raw_rows(conn, statement, params)
    result = FinishClaimResult(solo="solo" in variant)
    claimed = result.claimed.append
    for row in rows:
        if row[0] is None:
            result.throttled = True
        elif row[0]:
            # Positional, in ClaimedJob's field order (a batch builds 100 of them):
            # id, queue, task, args, attempt, max_attempts, priority, lock_key,
            # lease_ttl_s, timeout_s, created_at, cancel_requested, affinity_key,
            # workflow_id, node, parents, handed_over.
            args = row[6]
            claimed(
                ClaimedJob(
                    row[1],
                    row[4],
                    row[5],
                    args if type(args) is dict else {},
                    row[2],
                    *row[7:19],
                )
            )
        else:
            result.finished[row[1]] = row[3]
    # The claim's ORDER BY does not survive the UPDATE: restore its order (a
    # preferred warm job first, then priority).
    if len(result.claimed) > 1:
        warm = gate.warm_key
        result.claimed.sort(
            key=lambda j: (warm is None or j.affinity_key != warm, j.priority, j.id)
        )
    return result


def finish_only(
    conn: Connection,
    schema: str,
    *,
    worker_id: str,
    queue: str,
    outcomes: Sequence[Outcome],
    host: str | None = None,
) -> dict[int, str]:
    """Apply ``outcomes`` without claiming; return ``{job id: new status}`` of those applied."""
    return finish_and_claim(
        conn,
        schema,
        worker_id=worker_id,
        queue=queue,
        outcomes=outcomes,
        claim_limit=0,
        gate=ClaimGate(host=host or socket.gethostname()),
    ).finished


@dataclass(frozen=True, slots=True)
class BeatReply:
    """What the database answered a worker's beat: its row exists, held jobs lost, cancels asked.

    Not :class:`queue_engine.daemon.HeartbeatResult`, which is what one run of
    the heartbeat service did; this is the answer of the statement it sent.
    """

    registered: bool
    lost_ids: frozenset[int]
    cancel_ids: frozenset[int]
    #: An operator asked for a hard stop (``queue-ctl stop --now``, migration 0030).
    stop_now: bool = False


def heartbeat(
    conn: Connection,
    schema: str,
    *,
    worker_id: str,
    state: str,
    current_job_id: int | None,
    held: Sequence[tuple[int, int, str | None]],
    lease_ttl_s: int,
    rss_bytes: int | None = None,
    cpu_percent: float | None = None,
    telemetry: str | None = None,
    publish: bool = False,
    warm_key: str | None = None,
) -> BeatReply:
    """Beat the worker row and renew the leases of ``held`` ``(id, attempt, progress json)``.

    ``telemetry`` (JSON text, see :mod:`queue_engine.daemon.telemetry`) is stored by
    the same statement, and with ``publish`` also sent on ``<schema>.telemetry``;
    None keeps the stored one and publishes nothing (a beat that only writes
    progress).
    """
    row = execute_raw(
        conn,
        raw_statement("worker_heartbeat", schema),
        {
            "worker_id": worker_id,
            "state": state,
            "current_job_id": current_job_id,
            "rss_bytes": rss_bytes,
            "cpu_percent": cpu_percent,
            "telemetry": telemetry,
            "telemetry_channel": queries.telemetry_channel(schema),
            "publish": publish,
            "ids": [h[0] for h in held],
            "attempts": [h[1] for h in held],
            "progress": [h[2] for h in held],
            "lease_ttl_s": lease_ttl_s,
            "warm_key": warm_key,
        },
    ).fetchone()
    assert row is not None
    return BeatReply(bool(row[0]), frozenset(row[2]), frozenset(row[3]), bool(row[4]))


def register(
    conn: Connection, schema: str, *, worker_id: str, queue: str, host: str, pid: int, state: str
) -> None:
    """Insert (or refresh, after a reconnect) this worker's row."""
    conn.execute(
        queries.query("worker_register", schema),
        {"worker_id": worker_id, "queue": queue, "host": host, "pid": pid, "state": state},
    )


def mark_stopped(conn: Connection, schema: str, *, worker_id: str) -> None:
    """Record a clean exit on this worker's row."""
    conn.execute(queries.query("worker_stop", schema), {"worker_id": worker_id})


def any_due(conn: Connection, schema: str, *, queue: str, fresh_s: float) -> tuple[bool, int]:
    """(a job of ``queue`` is due, idle workers of ``queue``): the idle poll's probe.

    ``any_due_job.sql``; a worker counts as idle when its row says so and it
    heartbeated within ``fresh_s`` seconds.
    """
    row = conn.execute(
        queries.query("any_due_job", schema), {"queue": queue, "fresh_s": fresh_s}, prepare=True
    ).fetchone()
    return (bool(row[0]), int(row[1] or 0)) if row else (False, 0)


def try_lock_key(conn: Connection, schema: str, lock_key: str) -> bool:
    """Take the session advisory lock of a lock key; False if another session holds it."""
    params = {"namespace": queries.lock_key_namespace(schema), "lock_key": lock_key}
    row = conn.execute(queries.plain("claim_lock_key"), params).fetchone()
    return bool(row and row[0])


def unlock_key(conn: Connection, schema: str, lock_key: str) -> None:
    """Release the advisory lock of a lock key taken by :func:`try_lock_key`."""
    params = {"namespace": queries.lock_key_namespace(schema), "lock_key": lock_key}
    conn.execute(queries.plain("finish_lock_key"), params)


def release_orphans(
    conn: Connection, schema: str, *, worker_id: str, held_ids: Sequence[int]
) -> list[int]:
    """Give back running jobs claimed by ``worker_id`` but not in ``held_ids``; return their ids.

    Run after every (re)connect: a claim whose reply was lost with the
    connection leaves jobs nobody runs (see ``worker_release_orphans.sql``).
    """
    row = conn.execute(
        queries.query("worker_release_orphans", schema),
        {
            "worker_id": worker_id,
            "held_ids": list(held_ids),
            "jobs_channel": queries.jobs_channel(schema),
        },
    ).fetchone()
    return list(row[0]) if row else []


@dataclass(frozen=True, slots=True)
class WorkerControls:
    """The operator controls that concern one worker (``worker_controls.sql``)."""

    paused: bool = False
    scale_limit: int | None = None
    rate_limit: float | None = None
    parked: bool = False
    stop_requested: bool = False


def read_controls(
    conn: Connection, schema: str, *, worker_id: str, queue: str, host: str
) -> WorkerControls:
    """Read what the controls say about this worker now."""
    row = conn.execute(
        queries.query("worker_controls", schema),
        {"worker_id": worker_id, "queue": queue, "host": host},
    ).fetchone()
    assert row is not None  # one row, whether or not the queue has a control row
    return WorkerControls(
        paused=bool(row[0]),
        scale_limit=row[1],
        rate_limit=row[2],
        parked=bool(row[3]),
        stop_requested=bool(row[4]),
    )


def scale_namespace(schema: str, queue: str) -> str:
    """The text whose hash names a queue's scale slots (one lock space per schema and queue)."""
    return f"{schema}.scale:{queue}"


def take_scale_slot(conn: Connection, schema: str, *, queue: str, limit: int) -> int | None:
    """Take the lowest free scale slot below ``limit``; None when all are held."""
    if limit <= 0:
        return None
    row = conn.execute(
        queries.plain("scale_slot_take"),
        {"namespace": scale_namespace(schema, queue), "slot_limit": limit},
    ).fetchone()
    return None if row is None else int(row[0])


def release_scale_slot(conn: Connection, schema: str, *, queue: str, slot: int) -> None:
    """Give up a scale slot taken by :func:`take_scale_slot`."""
    conn.execute(
        queries.plain("scale_slot_release"),
        {"namespace": scale_namespace(schema, queue), "slot": slot},
    )
