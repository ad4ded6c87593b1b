"""The request and response bodies of the HTTP API (the fleet's answers: ``fleet_models``).

Why this module is long: it holds the bodies of the jobs, bulk and workflow
operations side by side, read as the OpenAPI document's schemas are; split,
the shared field types and their checks would be imported back and forth.

Pydantic checks shapes, JSON types, and the ranges and patterns of
:mod:`queue_engine.web.api.fields` (naming the field of any mistake in a
422), which also state them in the OpenAPI document; the engine's own
validation (:mod:`queue_engine.producer.validation`) then checks values with the
same rules as every other enqueue path, so the HTTP API cannot accept a job
the Python client would refuse. Unknown fields are
refused (``extra="forbid"``): a typo such as ``prioirty`` must not be
silently dropped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from queue_engine.operator.controls import BURST_RANGE, RATE_MAX, SCALE_RANGE
from queue_engine.producer.jobs import Job, JobStatus
from queue_engine.producer.validation import (
    CONCURRENCY_LIMIT_RANGE,
    LEASE_TTL_RANGE,
    MAX_ATTEMPTS_RANGE,
    MAX_DELAY_S,
    PRIORITY_RANGE,
    TIMEOUT_RANGE,
    WEIGHT_RANGE,
)
from queue_engine.producer.workflows.model import NodeInfo, WorkflowInfo
from queue_engine.producer.workflows.spec import MAX_NODES
from queue_engine.web.api.fields import (
    JSON_NUMBER,
    BodyId,
    Bool,
    HostName,
    JsonObject,
    JsonValue,
    Key,
    NodeName,
    QueueName,
    TaskName,
    Time,
    WorkerId,
    WorkflowName,
    absent,
    exactly_one,
    given,
)

#: The enqueue options' numbers, with the engine's ranges (:mod:`queue_engine.producer.validation`).
Priority = Annotated[int, Field(ge=PRIORITY_RANGE[0], le=PRIORITY_RANGE[1]), JSON_NUMBER]
MaxAttempts = Annotated[int, Field(ge=MAX_ATTEMPTS_RANGE[0], le=MAX_ATTEMPTS_RANGE[1]), JSON_NUMBER]
TimeoutS = Annotated[int, Field(ge=TIMEOUT_RANGE[0], le=TIMEOUT_RANGE[1]), JSON_NUMBER]
LeaseTtlS = Annotated[int, Field(ge=LEASE_TTL_RANGE[0], le=LEASE_TTL_RANGE[1]), JSON_NUMBER]
ConcurrencyLimit = Annotated[
    int,
    Field(ge=CONCURRENCY_LIMIT_RANGE[0], le=CONCURRENCY_LIMIT_RANGE[1]),
    JSON_NUMBER,
]
Weight = Annotated[int, Field(ge=WEIGHT_RANGE[0], le=WEIGHT_RANGE[1]), JSON_NUMBER]
Delay = Annotated[float, Field(ge=0, le=MAX_DELAY_S), JSON_NUMBER]
#: ``run_at`` and ``delay`` say the same thing two ways: at most one of them.
RUN_AT_OR_DELAY: dict[str, Any] = {
    "not": given("run_at", "delay", types={"run_at": "string", "delay": "number"})
}


class Strict(BaseModel):
    """A request body: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class JobCreate(Strict):
    """Every enqueue option (see ``Client.enqueue``); ``run_at`` or ``delay``, not both."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=RUN_AT_OR_DELAY)

    task: TaskName = Field(description="the task name a worker's app registered")
    queue: QueueName | None = Field(
        None, description="default: the task's, as its workers published it, else `default`"
    )
    args: JsonObject | None = Field(None, description="a JSON object (at most 1 MiB)")
    priority: Priority | None = Field(
        None, description="lower runs first (default: the task's, else 100)"
    )
    run_at: Time | None = Field(
        None, description="run not before (with an offset; years 1-9999 in UTC)"
    )
    delay: Delay | None = Field(None, description="run not before this many seconds from now")
    max_attempts: MaxAttempts | None = None
    timeout_s: TimeoutS | None = Field(None, description="wall-clock budget of one attempt")
    lease_ttl_s: LeaseTtlS | None = None
    idempotency_key: Key | None = Field(
        None, description="or the `Idempotency-Key` header: a re-send returns the same job"
    )
    dedupe_key: Key | None = Field(None, description="unique among queued and running jobs")
    lock_key: Key | None = Field(None, description="at most one running job per key")
    partition_key: Key | None = None
    producer: Key | None = None
    affinity_key: Key | None = None
    concurrency_key: Key | None = Field(
        None, description="at most concurrency_limit running jobs per key, fleet-wide"
    )
    concurrency_limit: ConcurrencyLimit | None = None
    weight: Weight | None = Field(
        None, description="tokens the job takes from its concurrency key's rate bucket (default 1)"
    )

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.enqueue``."""
        return self.model_dump()


class JobBatch(Strict):
    """Several jobs in one statement: all are validated before any is written."""

    jobs: list[JobCreate] = Field(min_length=1, max_length=10_000)


class JobIds(BaseModel):
    """The ids of a batch, in input order (an existing job's id for a repeated key)."""

    ids: list[int]


class JobTrigger(Strict):
    """The trigger body of HTTP-triggered ETL services (``POST /api/v1/jobs/trigger``)."""

    task: TaskName
    queue: QueueName | None = None
    args: JsonObject | None = None
    idempotency_key: Key | None = None
    lock_key: Key | None = None
    partition_key: Key | None = None
    priority: Priority | None = None
    available_at: Time | None = Field(
        None, description="run not before (`run_at`; years 1-9999 in UTC)"
    )
    max_attempts: MaxAttempts | None = None
    lease_ttl_sec: LeaseTtlS | None = Field(None, description="`lease_ttl_s`")
    producer: Key | None = None

    def options(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.enqueue``."""
        out = self.model_dump(exclude={"available_at", "lease_ttl_sec"})
        out["run_at"] = self.available_at
        out["lease_ttl_s"] = self.lease_ttl_sec
        return out


class Triggered(BaseModel):
    """The answer of a trigger: the job's id and status."""

    job_id: int
    status: str


class Open(BaseModel):
    """An answer whose main fields are declared; more may follow (``extra="allow"``)."""

    model_config = ConfigDict(extra="allow")


class JobOut(Open):
    """One job, as stored (columns added by later schema versions pass through)."""

    id: int
    queue: str
    task: str
    args: dict[str, Any]
    status: str
    priority: int
    available_at: datetime
    attempt: int
    max_attempts: int
    lease_ttl_s: int | None
    lease_expires_at: datetime | None
    heartbeat_at: datetime | None
    claimed_by: str | None
    timeout_s: int | None
    idempotency_key: str | None
    dedupe_key: str | None
    lock_key: str | None
    partition_key: str | None
    producer: str | None
    cancel_requested: bool
    progress: Any
    result: Any
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    affinity_key: str | None = None

    @classmethod
    def of(cls, job: Job) -> JobOut:
        """From the engine's record."""
        return cls.model_validate(job.to_dict())


class JobStatusOut(BaseModel):
    """The status route of the ETL-service shape (``GET /api/v1/jobs/{id}/status``)."""

    job_id: int
    status: str
    attempt: int
    max_attempts: int
    progress: Any
    result: Any
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class JobPage(BaseModel):
    """One page of a listing; pass ``next_after_id`` as ``after_id`` for the next (null: the end)."""

    items: list[JobOut]
    next_after_id: int | None


class EventOut(BaseModel):
    """One entry of a job's timeline."""

    id: int
    at: datetime
    kind: str
    from_status: str | None
    to_status: str | None
    attempt: int | None
    worker_id: str | None
    message: str | None


class EventPage(BaseModel):
    """Events after the cursor; pass ``next_after`` as ``after`` to read on (null: none yet)."""

    items: list[EventOut]
    next_after: int | None


class JobFilter(Strict):
    """Which jobs a bulk action is about (every field optional; all must match)."""

    status: list[JobStatus] | None = Field(None, description="any of these (none: the default)")
    queue: QueueName | None = None
    task: TaskName | None = None
    args: JsonObject | None = Field(None, description="the job's args contain this object")
    created_after: Time | None = None
    created_before: Time | None = None


#: A bulk request names its jobs one way: by ``ids`` or by ``filter``.
IDS_OR_FILTER = exactly_one(
    given("ids", types={"ids": "array"}), given("filter", types={"filter": "object"})
)


class BulkRequest(Strict):
    """A bulk cancel or retry: by ``ids`` or by ``filter`` (exactly one), at most the server's cap."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=IDS_OR_FILTER)

    ids: list[BodyId] | None = Field(
        None,
        max_length=100_000,
        description="at most QUEUE_ENGINE_WEB_BULK_MAX; an id past 2^63-1 names no job",
    )
    filter: JobFilter | None = None
    dry_run: Bool = Field(False, description="only count the jobs it would act on")


class BulkItem(BaseModel):
    """What happened to one job of a bulk action."""

    id: int
    ok: bool
    status: str | None = None
    error: str | None = None


class BulkResult(BaseModel):
    """The outcome of a bulk action (or, with ``dry_run``, the count it would act on)."""

    dry_run: bool
    matched: int = Field(description="the jobs named (ids of existing jobs) or found (filter)")
    capped: bool = Field(description="more jobs match than one request acts on: send it again")
    done: int = 0
    failed: int = 0
    items: list[BulkItem] = []


class ScaleBody(Strict):
    """A scale limit: at most ``limit`` workers of the queue claim (null: no limit)."""

    limit: Annotated[int, Field(ge=SCALE_RANGE[0], le=SCALE_RANGE[1]), JSON_NUMBER] | None


#: A burst goes with a rate: no burst when the rate is null (no limit).
BURST_NEEDS_RATE: dict[str, Any] = {
    "anyOf": [given("rate", types={"rate": "number"}), absent("burst")],
}


class RateBody(Strict):
    """A rate limit: at most ``rate`` jobs started per second, in bursts of ``burst`` (null: none)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=BURST_NEEDS_RATE)

    rate: Annotated[float, Field(gt=0, le=RATE_MAX), JSON_NUMBER] | None
    burst: Annotated[int, Field(ge=BURST_RANGE[0], le=BURST_RANGE[1]), JSON_NUMBER] | None = None


#: A fleet target is a host (with an optional queue) or one worker, never both.
HOST_OR_WORKER = exactly_one(
    {"allOf": [given("host", types={"host": "string"}), absent("worker_id")]},
    {"allOf": [given("worker_id", types={"worker_id": "string"}), absent("host", "queue")]},
)


class FleetTargetBody(Strict):
    """Which workers: a ``host`` (with an optional ``queue``) or one ``worker_id``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=HOST_OR_WORKER)

    host: HostName | None = None
    queue: QueueName | None = None
    worker_id: WorkerId | None = None


class StopBody(FleetTargetBody):
    """Which workers to stop, and whether their running job is given back at once."""

    now: bool = Field(
        default=False,
        description="give the running job back to the queue at once (attempt not counted) "
        "instead of letting it finish, as `queue-ctl stop --now`",
    )


class QueueOut(Open):
    """One queue's figures (definitions: docs/operations.md), as ``queue-ctl stats --json``."""

    queue: str
    queued: int = Field(description="claimable now")
    delayed: int = Field(description="queued, available later")
    running: int
    in_1m: int = Field(description="jobs created in the last minute")
    out_1m: int = Field(description="jobs finished in the last minute")
    oldest_queued_s: float | None
    wait_p50_s: float | None
    wait_p95_s: float | None
    run_p50_s: float | None
    run_p95_s: float | None
    workers_live: int
    workers_parked: int
    paused: bool
    scale_limit: int | None
    rate_limit: float | None
    throughput_per_s: dict[str, float]
    estimated: list[str] = Field(
        default_factory=list,
        description="figures that are estimates (above QUEUE_ENGINE_STATS_EXACT_CAP)",
    )
    at_least: list[str] = Field(
        default_factory=list,
        description="figures that are lower bounds (counted up to QUEUE_ENGINE_STATS_EXACT_CAP)",
    )


class QueuesOut(BaseModel):
    """Every queue with jobs or controls."""

    queues: list[QueueOut]


class WorkerOut(Open):
    """One row of the workers table (workers, orchestrators, schedulers)."""

    id: str
    role: str
    host: str
    pid: int
    queue: str | None
    state: str
    current_job_id: int | None
    heartbeat_age_s: float
    liveness: str
    telemetry: dict[str, Any] | None = Field(description="host load, GPU use when reported")
    load_1m: float | None


class WorkersOut(BaseModel):
    """Every worker row."""

    workers: list[WorkerOut]


class ScheduleOut(Open):
    """One schedule, as ``queue-ctl schedules list --json``."""

    name: str
    expression: str
    tz: str
    task: str
    queue: str
    enabled: bool
    source: str
    last_slot: str | None
    last_job_id: int | None
    next_fire: str | None


class SchedulesOut(BaseModel):
    """Every schedule; ``errors`` lists rows that no longer validate."""

    schedules: list[ScheduleOut]
    errors: list[str]


# -- workflows --------------------------------------------------------------------


class WorkflowEdgeIn(Strict):
    """An edge from a parent node; ``finished``: any end of the parent will do."""

    node: NodeName
    requires: Literal["succeeded", "finished"] = "succeeded"


#: The enqueue options a job node takes (an input node takes ``queue`` and ``timeout_s`` only).
JOB_NODE_OPTIONS = (
    "args",
    "priority",
    "run_at",
    "delay",
    "max_attempts",
    "lease_ttl_s",
    "lock_key",
    "partition_key",
    "producer",
    "affinity_key",
    "skip_if",
)
#: A node is a job (``task``) or an input node (``input: true``, no job options).
JOB_OR_INPUT = exactly_one(
    {
        "allOf": [
            given("task", types={"task": "string"}),
            {"properties": {"input": {"const": False}}},
            RUN_AT_OR_DELAY,
        ]
    },
    {
        "allOf": [
            {"required": ["input"], "properties": {"input": {"const": True}}},
            absent("task", *JOB_NODE_OPTIONS),
        ]
    },
)


class WorkflowNodeIn(Strict):
    """One node: a job (``task`` and the enqueue options) or an input node (``input: true``).

    ``idempotency_key`` and ``dedupe_key`` are accepted only to be refused by
    the engine with a message that says why (the workflow's key stands for
    its nodes), rather than as an unknown field; the document leaves them out.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=JOB_OR_INPUT)

    node: NodeName = Field(description="the node's name, unique in the workflow")
    task: TaskName | None = Field(None, description="required unless `input` is true")
    after: list[NodeName | WorkflowEdgeIn] = Field(
        default_factory=list,
        description="parent node names (of this workflow), or `{node, requires}`",
    )
    input: Bool = Field(
        False, description="an input node: waits for `provide-input` (takes `timeout_s`, `queue`)"
    )
    queue: QueueName | None = None
    args: JsonObject | None = Field(
        None, description="may hold expressions: `$result`/`$from`, `$filter`, `$eq`, ..."
    )
    skip_if: JsonObject | None = Field(
        None,
        description="a predicate on the parents (`$eq`, `$ne`, `$and`, ...): when it holds, "
        "the node ends skipped without running",
    )
    priority: Priority | None = None
    run_at: Time | None = None
    delay: Delay | None = None
    max_attempts: MaxAttempts | None = None
    timeout_s: TimeoutS | None = None
    lease_ttl_s: LeaseTtlS | None = None
    idempotency_key: SkipJsonSchema[str | None] = None
    dedupe_key: SkipJsonSchema[str | None] = None
    lock_key: Key | None = None
    partition_key: Key | None = None
    producer: Key | None = None
    affinity_key: Key | None = None
    # Refused by Workflow.add (not yet written by start_workflow): a clear 4xx.
    concurrency_key: Key | None = None
    concurrency_limit: ConcurrencyLimit | None = None
    weight: Weight | None = None

    def options(self) -> dict[str, Any]:
        """The enqueue options that were given (``Workflow.add``'s keyword arguments)."""
        return self.model_dump(exclude={"node", "task", "after", "input"}, exclude_none=True)


class WorkflowCreate(Strict):
    """A workflow to start: checked whole (names, edges, cycles, options) before any write.

    Node names are unique in the workflow, ``after`` names nodes of the same
    workflow, and the edges make no cycle: rules a JSON Schema cannot state,
    checked by the engine (a 422 naming the node).
    """

    name: WorkflowName
    idempotency_key: Key | None = Field(
        None, description="or the `Idempotency-Key` header: a re-send returns the same workflow"
    )
    producer: Key | None = None
    nodes: list[WorkflowNodeIn] = Field(min_length=1, max_length=MAX_NODES)


class WorkflowOut(BaseModel):
    """One workflow: its state and per-state node counts (no scan of its jobs)."""

    id: int
    name: str
    state: str
    node_count: int
    counts: dict[str, int]
    idempotency_key: str | None
    producer: str | None
    schedule: str | None
    cancel_requested: bool
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, info: WorkflowInfo) -> WorkflowOut:
        """From the engine's record."""
        return cls.model_validate(info.to_dict())


class WorkflowPage(BaseModel):
    """Workflows newest first; pass ``next_before_id`` as ``before_id`` for the next (null: the end)."""

    items: list[WorkflowOut]
    next_before_id: int | None


class WorkflowEdgeOut(BaseModel):
    """A node's parent and what the node requires of it."""

    node: str
    requires: str


class WorkflowNodeOut(BaseModel):
    """One node of a workflow: its job's state and its edges."""

    job_id: int
    node: str
    task: str
    queue: str
    status: str
    attempt: int
    max_attempts: int
    pending_parents: int | None
    started_at: datetime | None
    finished_at: datetime | None
    duration_ms: int | None
    error: str | None
    result: Any
    after: list[WorkflowEdgeOut]

    @classmethod
    def of(cls, node: NodeInfo) -> WorkflowNodeOut:
        """From the engine's record."""
        return cls.model_validate(node.to_dict())


class WorkflowNodes(BaseModel):
    """Every node of one workflow, parents first."""

    workflow_id: int
    items: list[WorkflowNodeOut]


class WorkflowCanceled(BaseModel):
    """A cancel: nodes canceled at once, running nodes asked to stop."""

    workflow_id: int
    canceled: int
    stopping: int


class WorkflowRetried(BaseModel):
    """A retry: how many nodes run again."""

    workflow_id: int
    rerun: int


class InputIn(Strict):
    """The value of an input node (any JSON value without NUL, at most 1 MiB)."""

    node: NodeName
    value: JsonValue = None


class InputProvided(BaseModel):
    """``provided``: given now; ``already``: the node had its value (a safe re-send)."""

    workflow_id: int
    node: str
    provided: bool
    already: bool
