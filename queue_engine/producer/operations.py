"""The client operations, independent of sync or async I/O.

:class:`~queue_engine.producer.client.Client` and :class:`~queue_engine.producer.async_client.AsyncClient`
differ only in how they run a statement; what each operation sends and how it
reads the answer lives here once.

Why this module is long (about 500 lines): it is every client operation's
statement and answer, each a few small functions over the same ``Statement``,
``JobSpec`` and ``Job``; split by operation, the enqueue helpers that bulk,
keyed and plain enqueues share would stand in three modules that import each
other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, LiteralString, Unpack

from queue_engine.foundation import sql as queries
from queue_engine.foundation.errors import (
    InvalidTransition,
    JobNotFound,
    QueueEngineError,
    ValidationError,
)
from queue_engine.producer.jobs import Job, JobStatus
from queue_engine.producer.tasks import TaskDefinition, registry
from queue_engine.producer.validation import (
    DEFAULTED_OPTIONS,
    OPTION_NAMES,
    EnqueueOptions,
    JobSpec,
    build_spec,
    check_id,
    check_option_names,
    check_queue_name,
    check_task_name,
    encode_args,
    spec_from_options,
)

BULK_COLUMNS = (
    "queue",
    "task",
    "args_json",
    "priority",
    "run_at",
    "delay_s",
    "max_attempts",
    "timeout_s",
    "lease_ttl_s",
    "idempotency_key",
    "dedupe_key",
    "lock_key",
    "partition_key",
    "producer",
    "affinity_key",
    "concurrency_key",
    "concurrency_limit",
    "weight",
    "defaults_of",
)

#: How often an enqueue is re-run when its conflicting job is not yet visible.
CONFLICT_RETRIES = 10
LIST_LIMIT_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Statement:
    """A named query and its parameters."""

    query: LiteralString
    params: dict[str, Any]


class EnqueueConflictUnresolved(QueueEngineError):
    """An enqueue conflicted with a job that this transaction can never see."""

    def __init__(self) -> None:
        super().__init__(
            "enqueue conflicted with a job this transaction cannot see; "
            "enqueue under READ COMMITTED or retry the transaction"
        )


def job_spec(task: str, **options: Unpack[EnqueueOptions]) -> JobSpec:
    """Validate one enqueue request, with the task's registered defaults if it is known here."""
    return spec_for(task, options)


def spec_for(task: str, options: EnqueueOptions) -> JobSpec:
    """:func:`job_spec` of options already in a dict (a client's ``**options``: no copy)."""
    return spec_from_options(task, options, registry.get(check_task_name(task)))


#: The options :func:`plain_enqueue` serves: a single enqueue that gives no other.
PLAIN_OPTIONS = frozenset({"queue", "args"})


def is_plain(options: EnqueueOptions) -> bool:
    """True when a single enqueue gives no option but ``queue`` and ``args`` (:func:`plain_enqueue`).

    Another option given as None counts as left out (``queue-ctl`` and
    wrappers pass every keyword); an unknown name does not, so that the
    full validation refuses it.
    """
    if options.keys() <= PLAIN_OPTIONS:
        return True
    return all(
        value is None and name in OPTION_NAMES
        for name, value in options.items()
        if name not in PLAIN_OPTIONS
    )


#: :func:`plain_enqueue`'s validated requests by (task, queue): the task's
#: registered definition they were built with, the spec, its parameters.
_PLAIN: dict[tuple[str, str | None], tuple[TaskDefinition | None, JobSpec, dict[str, Any]]] = {}
#: More distinct (task, queue) pairs than this in one process and the cache starts over.
PLAIN_CACHE_MAX = 1024


def plain_enqueue(task: str, queue: str | None, args: Any) -> tuple[JobSpec, dict[str, Any]]:
    """The spec and ``enqueue_plain`` parameters of an enqueue that gives only task, queue, args.

    That is the usual single enqueue. Its task and queue are validated, and
    its 12 parameters built, once per (task, queue) and kept: a call only
    encodes its ``args`` (bench/runs/2026-11-27-log.md, "Single enqueue: the client's
    Python, cut"). The entry is built again when the task's registration
    changes (another definition object), so registered defaults still apply.

    Without args the spec and the parameters returned are the kept ones,
    shared by every such call: read them, never change them.
    """
    declared = registry.get(check_task_name(task))
    try:
        entry = _PLAIN.get((task, queue))
    except TypeError:  # an unhashable queue, which build_spec refuses below
        entry = None
    if entry is None or entry[0] is not declared:
        spec = build_spec(task, declared=declared, queue=queue)
        entry = (declared, spec, spec.params())
        if len(_PLAIN) >= PLAIN_CACHE_MAX:
            _PLAIN.clear()
        _PLAIN[(task, queue)] = entry
    if args is None or args == {}:
        return entry[1], entry[2]
    args_json = encode_args(args)
    return entry[1].with_args_json(args_json), {**entry[2], "args": args_json}


def spec_from_item(item: Any, index: int) -> JobSpec:
    """Validate one ``enqueue_many`` item; errors name the item's position."""
    where = f"jobs[{index}]"
    if not isinstance(item, dict):
        raise ValidationError(
            f"{where} must be a dict of enqueue options, got {type(item).__name__}"
        )
    check_option_names(item, where=where)
    try:
        return job_spec(**item)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


def is_keyed(spec: JobSpec) -> bool:
    """True when the job needs the full insert (``enqueue.sql``), not a plain one.

    An idempotency or dedupe key may conflict; a concurrency key (migration
    0031) is a column only the full statements write, so the plain inserts,
    the usual enqueue, stay as they were and pay nothing for it.
    """
    return (
        spec.idempotency_key is not None
        or spec.dedupe_key is not None
        or spec.concurrency_key is not None
    )


def plain_query_name(spec: JobSpec) -> LiteralString:
    """The plain single insert for ``spec``: with the task's defaults looked up, or without.

    ``enqueue_plain_defaults`` fills the options still unset from the task's
    defaults in the database and answers them; ``enqueue_plain``, for a spec
    with nothing to fill, does no lookup.
    """
    return "enqueue_plain" if spec.defaults_of is None else "enqueue_plain_defaults"


def enqueue_statement(schema: str, spec: JobSpec) -> Statement:
    """Return the single-job enqueue statement: the plain insert unless a key may conflict.

    The keyed statement answers a whole job row (the new one, or the existing
    one that holds the key: read it with :meth:`Job.from_row`); the plain ones
    answer the columns the server decided: read them with :func:`inserted_job`.
    """
    if is_keyed(spec):
        return Statement(queries.query("enqueue", schema), spec.params())
    return Statement(queries.query(plain_query_name(spec), schema), spec.params())


def inserted_job(spec: JobSpec, row: Sequence[Any]) -> Job:
    """The Job a plain insert of ``spec`` created, from the columns its statement answers.

    ``enqueue_plain`` answers ``(id, available_at, created_at)``;
    ``enqueue_plain_defaults`` also the five options the task's defaults may
    have filled (queue, priority, max_attempts, timeout_s, lease_ttl_s). Every
    other column is what the client sent or the table's default for a new
    row, so it is not worth a trip through the wire and the row parser
    (bench/runs/2026-11-27-log.md, "Single enqueue: where the time goes"). ``args`` is
    decoded from the JSON that was stored, so it equals what
    :meth:`Client.get` answers (jsonb may order object keys differently).
    """
    if len(row) == 3:
        job_id, available_at, created_at = row
        queue, priority, max_attempts = spec.queue, spec.priority, spec.max_attempts
        timeout_s, lease_ttl_s = spec.timeout_s, spec.lease_ttl_s
        # Sent only for a spec with nothing left to fill (plain_query_name).
        assert queue is not None and priority is not None and max_attempts is not None
    else:
        job_id, available_at, created_at, queue, priority, max_attempts, timeout_s, lease_ttl_s = (
            row
        )
    args_json = spec.args_json
    # Positional, in the order of Job's fields (a unit test builds the same Job
    # by keyword): a quarter less of the call than keywords.
    return Job(
        job_id,
        queue,
        spec.task,
        {} if args_json == "{}" else json.loads(args_json),
        JobStatus.QUEUED,
        priority,
        available_at,
        0,  # attempt
        max_attempts,
        lease_ttl_s,
        None,  # lease_expires_at
        None,  # heartbeat_at
        None,  # claimed_by
        timeout_s,
        None,  # idempotency_key: a keyed enqueue answers its whole row instead
        None,  # dedupe_key
        spec.lock_key,
        spec.partition_key,
        spec.producer,
        False,  # cancel_requested
        None,  # progress
        None,  # result
        None,  # error
        created_at,
        None,  # started_at
        None,  # finished_at
        None,  # duration_ms
        True,  # created
        spec.affinity_key,
    )


def enqueue_many_specs(jobs: Iterable[Any]) -> list[JobSpec]:
    """Validate every item before any is sent, so a bad item writes nothing.

    A batch usually repeats one set of options (task, queue, ...) with
    different ``args``. The options of each such set are validated once, at
    the first item that has them; a later item with the same options, each of
    the same type and equal value, only has its ``args`` encoded. That halves
    the client's Python per bulk job (bench/runs/2026-11-27-log.md, "Bulk enqueue: the
    options validated once per batch"). Unhashable option values (always
    refused) are validated item by item, so the error names their position.
    """
    if isinstance(jobs, dict | str | bytes):
        raise ValidationError("enqueue_many takes a list of dicts of enqueue options")
    validated: dict[tuple[tuple[Any, type, Any], ...], JobSpec] = {}
    specs: list[JobSpec] = []
    for index, item in enumerate(jobs):
        options: tuple[tuple[Any, type, Any], ...] | None = None
        first = None
        if isinstance(item, dict):
            options = tuple([(k, v.__class__, v) for k, v in item.items() if k != "args"])
            try:
                first = validated.get(options)
            except TypeError:  # an unhashable value, always refused: validated in full
                options = None
        if first is None:
            spec = spec_from_item(item, index)
            if options is not None:
                validated[options] = spec
        else:
            try:
                spec = first.with_args_json(encode_args(item.get("args")))
            except ValidationError as exc:
                raise ValidationError(f"jobs[{index}]: {exc}") from None
        specs.append(spec)
    return specs


def owns_transaction(call_conn: object, client_conn: object) -> bool:
    """True when the client runs its own autocommit statements (it may retry them).

    On a caller's connection a failed statement aborts the caller's
    transaction, so only the caller can decide to retry.
    """
    return call_conn is None and client_conn is None


def has_keys(specs: Sequence[JobSpec]) -> bool:
    """True when some job needs the full bulk insert (:func:`is_keyed`)."""
    return any(is_keyed(s) for s in specs)


def enqueue_many_statement(schema: str, specs: Sequence[JobSpec]) -> Statement:
    """Return the bulk statement: one array per column, one round trip.

    Without keys no row can conflict and the plain insert is used (about twice
    as fast): ``enqueue_many_plain_defaults`` when some row leaves options to
    its task's defaults in the database, else ``enqueue_many_plain``, which
    looks nothing up. With keys, the statement that resolves each conflicting
    row to its existing job (and looks the defaults up). A column that is NULL in every row is sent as a NULL
    array: ``unnest`` pads it to the length of the others, which saves sending
    and parsing it.
    """
    keyed = has_keys(specs)
    columns: dict[str, Any] = {}
    if not keyed:
        params = plain_bulk_params(specs)
        # No row names a task to look up: defaults_of is NULL in every row.
        nothing_to_fill = params["defaults_of"] is None and params["defaults_of_all"] is None
        name: LiteralString = (
            "enqueue_many_plain" if nothing_to_fill else "enqueue_many_plain_defaults"
        )
        return Statement(queries.query(name, schema), params)
    for name in BULK_COLUMNS:
        values = [getattr(spec, name) for spec in specs]
        columns["args" if name == "args_json" else name] = (
            values if any(v is not None for v in values) else None
        )
    return Statement(queries.query("enqueue_many", schema), columns)


def plain_bulk_params(specs: Sequence[JobSpec]) -> dict[str, Any]:
    """Parameters of ``enqueue_many_plain[_defaults].sql``: per column, an array or one value.

    A column whose value is the same in every row (the usual batch: one task,
    one queue, no delay) is sent once as ``<column>_all`` with a NULL array,
    so neither side handles n copies of it (bench/runs/2026-11-27-log.md, "Bulk enqueue").
    """
    params: dict[str, Any] = {"n": len(specs)}
    for name in BULK_COLUMNS:
        if name in (
            "idempotency_key",
            "dedupe_key",
            "concurrency_key",
            "concurrency_limit",
            "weight",
        ):
            continue
        key = "args" if name == "args_json" else name
        values = [getattr(spec, name) for spec in specs]
        first = values[0] if values else None
        if values.count(first) == len(values):
            params[key], params[f"{key}_all"] = None, first
        else:
            params[key], params[f"{key}_all"] = values, None
    return params


def ids_from_plain_bulk(rows: Sequence[tuple[Any, ...]]) -> list[int]:
    """Ids of the plain bulk insert in input order (they ascend in input order)."""
    return sorted(int(r[0]) for r in rows)


def resolve_keyed_bulk(
    rows: Sequence[tuple[Any, ...]], pending: list[int], ids: list[int | None]
) -> list[int]:
    """Record the ids of a keyed bulk insert; return the positions still unresolved."""
    unresolved = []
    for (_ordinal, job_id, _created), index in zip(rows, pending, strict=True):
        if job_id is None:
            unresolved.append(index)
        else:
            ids[index] = int(job_id)
    return unresolved


def job_or_none(row: dict[str, Any] | None) -> Job | None:
    """Turn a ``dict_row`` into a Job."""
    return None if row is None else Job.from_row(row)


def get_statement(schema: str, job_id: int) -> Statement:
    """Return the statement reading one job."""
    return Statement(queries.query("get_job", schema), {"id": _check_id(job_id)})


def cancel_statement(schema: str, job_id: int, message: str) -> Statement:
    """Return the cancel statement (queued → canceled, running → cancel requested)."""
    return Statement(
        queries.query("cancel_job", schema),
        {
            "id": _check_id(job_id),
            "message": message,
            "cancel_channel": queries.cancel_channel(schema),
        },
    )


def retry_statement(schema: str, job_id: int, message: str) -> Statement:
    """Return the statement putting a finished, unsuccessful job back in its queue."""
    return Statement(
        queries.query("retry_job", schema),
        {"id": _check_id(job_id), "message": message, "jobs_channel": queries.jobs_channel(schema)},
    )


def list_statement(
    schema: str,
    *,
    queue: str | None,
    status: str | None,
    task: str | None,
    limit: int,
    older_than_s: float | None = None,
) -> Statement:
    """Return the statement listing jobs newest first.

    ``older_than_s`` keeps jobs created more than that many seconds ago, by the
    database clock (so a client with a skewed clock sees the same answer).
    """
    if queue is not None:
        check_queue_name(queue)
    if status is not None:
        status = _check_status(status)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValidationError(f"limit must be an integer between 1 and {LIST_LIMIT_MAX}")
    if older_than_s is not None:
        older_than_s = _check_age(older_than_s)
    return Statement(
        queries.query("list_jobs", schema),
        {
            "queue": queue,
            "status": status,
            "task": task,
            "limit": limit,
            "older_than_s": older_than_s,
        },
    )


#: Most jobs one page of :func:`page_statement` returns.
PAGE_LIMIT_MAX = 1000


def page_statement(
    schema: str,
    *,
    statuses: Sequence[str] | None = None,
    queue: str | None = None,
    task: str | None = None,
    args_contain: dict[str, Any] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    after_id: int | None = None,
    limit: int = 100,
) -> Statement:
    """Return one page of jobs newest first, after the cursor ``after_id`` (keyset, no offset).

    ``args_contain``: a JSON object the job's args must contain (``@>``).
    The next page starts after the last id of this one; jobs inserted in
    between have larger ids and never shift it.
    """
    if queue is not None:
        check_queue_name(queue)
    if task is not None:
        check_task_name(task)
    checked = None if not statuses else [_check_status(s) for s in statuses]
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE_LIMIT_MAX:
        raise ValidationError(f"limit must be an integer between 1 and {PAGE_LIMIT_MAX}")
    if after_id is not None:
        _check_id(after_id)
    if args_contain is not None and not isinstance(args_contain, dict):
        raise ValidationError("args filter must be a JSON object")
    for name, value in (("created_after", created_after), ("created_before", created_before)):
        if value is not None and value.tzinfo is None:
            raise ValidationError(f"{name} must be a timezone-aware time")
    created_after, created_before = _utc(created_after), _utc(created_before)
    return Statement(
        queries.query("list_jobs_page", schema),
        {
            "after_id": after_id,
            "statuses": checked,
            "queue": queue,
            "task": task,
            # The rules of a job's args (no NUL, no lone surrogate, 1 MiB): jsonb's.
            "args": None if args_contain is None else encode_args(args_contain),
            "created_after": created_after,
            "created_before": created_before,
            "limit": limit,
        },
    )


def _utc(value: datetime | None) -> datetime | None:
    """A time bound in UTC (Postgres takes offsets up to 15:59 only, Python's reach 23:59).

    A bound whose UTC instant falls outside Python's years 1-9999 is the
    earliest or latest time there is: as a filter it means the same.
    """
    if value is None:
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:
        if value.year < 5000:
            return datetime.min.replace(tzinfo=UTC)
        return datetime.max.replace(tzinfo=UTC)


def _check_status(status: str) -> str:
    try:
        return str(JobStatus(status))
    except ValueError:
        known = ", ".join(s.value for s in JobStatus)
        raise ValidationError(f"unknown status {status!r}; known: {known}") from None


#: The fields an idempotent re-send must repeat unchanged (``run_at``/``delay``
#: are left out: a relative delay cannot be compared once the job exists).
IDEMPOTENT_FIELDS = (
    "task",
    "queue",
    "args",
    "priority",
    "max_attempts",
    "timeout_s",
    "lease_ttl_s",
    "dedupe_key",
    "lock_key",
    "partition_key",
    "producer",
    "affinity_key",
)


def idempotency_mismatch(existing: Job, spec: JobSpec) -> list[str]:
    """The fields in which a request differs from the job already holding its idempotency key.

    Empty: the request is a re-send of the same job (answer the existing
    job); otherwise the key was reused for different work, which the caller
    should refuse rather than silently return a job that is not the one asked for.
    """
    asked = {**spec.params(), "args": json.loads(spec.args_json)}
    return [
        name
        for name in IDEMPOTENT_FIELDS
        if getattr(existing, name) != asked[name]
        # Left unset, it took the task's defaults: whatever they were, the
        # re-send asks for the same (they may have been published anew since).
        and not (asked[name] is None and name in DEFAULTED_OPTIONS)
    ]


def _check_age(seconds: float) -> float:
    """A finite, non-negative number of seconds (bool refused: ``True`` is not an age)."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        raise ValidationError(
            f"older_than_s must be a finite number of seconds >= 0, got {seconds!r}"
        )
    return float(seconds)


def cancel_refusal(job_id: int, current: Job | None) -> QueueEngineError:
    """Explain why a cancel changed nothing."""
    if current is None:
        return JobNotFound(job_id)
    return InvalidTransition(f"cannot cancel job {job_id}: it already finished ({current.status})")


def retry_refusal(job_id: int, current: Job | None) -> QueueEngineError:
    """Explain why a retry changed nothing."""
    if current is None:
        return JobNotFound(job_id)
    if current.workflow_id is not None:
        return InvalidTransition(
            f"cannot retry job {job_id} alone: it is node {current.node} of workflow "
            f"{current.workflow_id}; retry the workflow (queue-ctl workflows retry "
            f"{current.workflow_id}), which re-runs it and its descendants"
        )
    return InvalidTransition(
        f"cannot retry job {job_id}: it is {current.status} "
        "(only failed, canceled, lost or skipped jobs can be retried)"
    )


def dedupe_refusal(job_id: int) -> QueueEngineError:
    """Explain a retry refused because its dedupe key is taken by an active job."""
    return InvalidTransition(
        f"cannot retry job {job_id}: another queued or running job holds its dedupe_key"
    )


def _check_id(job_id: Any) -> int:
    return check_id("job", job_id)
