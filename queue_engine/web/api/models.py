"""The request and response bodies of the HTTP API.

Pydantic checks shapes and types (and names the field of any mistake in a
422); the engine's own validation (:mod:`queue_engine.validation`) then
checks values with the same rules as every other enqueue path, so the HTTP
API cannot accept a job the Python client would refuse. Unknown fields are
refused (``extra="forbid"``): a typo such as ``prioirty`` must not be
silently dropped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from queue_engine.jobs import Job
from queue_engine.workflows.model import NodeInfo, WorkflowInfo


class Strict(BaseModel):
    """A request body: unknown fields are an error."""

    model_config = ConfigDict(extra="forbid")


class JobCreate(Strict):
    """Every enqueue option (see ``Client.enqueue``)."""

    task: str = Field(description="the task name a worker's app registered")
    queue: str | None = Field(
        None, description="default: the task's, as its workers published it, else `default`"
    )
    args: dict[str, Any] | None = Field(None, description="a JSON object (at most 1 MiB)")
    priority: int | None = Field(
        None, description="0-1000, lower runs first (default: the task's, else 100)"
    )
    run_at: datetime | None = Field(None, description="run not before (timezone-aware)")
    delay: float | None = Field(None, description="run not before this many seconds from now")
    max_attempts: int | None = None
    timeout_s: int | None = Field(None, description="wall-clock budget of one attempt")
    lease_ttl_s: int | None = None
    idempotency_key: str | None = Field(
        None, description="or the `Idempotency-Key` header: a re-send returns the same job"
    )
    dedupe_key: str | None = Field(None, description="unique among queued and running jobs")
    lock_key: str | None = Field(None, description="at most one running job per key")
    partition_key: str | None = None
    producer: str | None = None
    affinity_key: str | None = None

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

    task: str
    queue: str | None = None
    args: dict[str, Any] | None = None
    idempotency_key: str | None = None
    lock_key: str | None = None
    partition_key: str | None = None
    priority: int | None = None
    available_at: datetime | None = Field(None, description="run not before (`run_at`)")
    max_attempts: int | None = None
    lease_ttl_sec: int | None = Field(None, description="`lease_ttl_s`")
    producer: str | None = None

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

    status: list[str] | None = None
    queue: str | None = None
    task: str | None = None
    args: dict[str, Any] | None = Field(None, description="the job's args contain this object")
    created_after: datetime | None = None
    created_before: datetime | None = None


class BulkRequest(Strict):
    """A bulk cancel or retry: by ``ids`` or by ``filter`` (one of them), at most the server's cap."""

    ids: list[int] | None = Field(None, max_length=100_000)
    filter: JobFilter | None = None
    dry_run: bool = Field(False, description="only count the jobs it would act on")


class BulkItem(BaseModel):
    """What happened to one job of a bulk action."""

    id: int
    ok: bool
    status: str | None = None
    error: str | None = None


class BulkResult(BaseModel):
    """The outcome of a bulk action (or, with ``dry_run``, the count it would act on)."""

    dry_run: bool
    matched: int
    capped: bool = Field(description="more jobs match than one request acts on: send it again")
    done: int = 0
    failed: int = 0
    items: list[BulkItem] = []


class ScaleBody(Strict):
    """A scale limit: at most ``limit`` workers of the queue claim (null: no limit)."""

    limit: int | None


class RateBody(Strict):
    """A rate limit: at most ``rate`` jobs started per second, in bursts of ``burst`` (null: none)."""

    rate: float | None
    burst: int | None = None


class FleetTargetBody(Strict):
    """Which workers: a ``host`` (with an optional ``queue``) or one ``worker_id``."""

    host: str | None = None
    queue: str | None = None
    worker_id: str | None = None


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

    node: str
    requires: Literal["succeeded", "finished"] = "succeeded"


class WorkflowNodeIn(Strict):
    """One node: a job (``task`` and the enqueue options) or an input node (``input: true``).

    ``idempotency_key`` and ``dedupe_key`` are accepted only to be refused by
    the engine with a message that says why (the workflow's key stands for
    its nodes), rather than as an unknown field.
    """

    node: str = Field(description="the node's name, unique in the workflow")
    task: str | None = Field(None, description="required unless `input` is true")
    after: list[str | WorkflowEdgeIn] = Field(
        default_factory=list, description="parent node names, or `{node, requires}`"
    )
    input: bool = Field(
        False, description="an input node: waits for `provide-input` (takes `timeout_s`, `queue`)"
    )
    queue: str | None = None
    args: dict[str, Any] | None = Field(None, description="may hold `$result` references")
    priority: int | None = None
    run_at: datetime | None = None
    delay: float | None = None
    max_attempts: int | None = None
    timeout_s: int | None = None
    lease_ttl_s: int | None = None
    idempotency_key: str | None = None
    dedupe_key: str | None = None
    lock_key: str | None = None
    partition_key: str | None = None
    producer: str | None = None
    affinity_key: str | None = None

    def options(self) -> dict[str, Any]:
        """The enqueue options that were given (``Workflow.add``'s keyword arguments)."""
        return self.model_dump(exclude={"node", "task", "after", "input"}, exclude_none=True)


class WorkflowCreate(Strict):
    """A workflow to start: checked whole (names, edges, cycles, options) before any write."""

    name: str
    idempotency_key: str | None = Field(
        None, description="or the `Idempotency-Key` header: a re-send returns the same workflow"
    )
    producer: str | None = None
    nodes: list[WorkflowNodeIn] = Field(min_length=1, max_length=100_000)


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
    """The value of an input node (any JSON value, at most 1 MiB)."""

    node: str
    value: Any = None


class InputProvided(BaseModel):
    """``provided``: given now; ``already``: the node had its value (a safe re-send)."""

    workflow_id: int
    node: str
    provided: bool
    already: bool
