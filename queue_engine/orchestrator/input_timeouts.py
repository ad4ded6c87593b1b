"""Input timeouts: the leader fails input nodes whose value did not come in time.

An input node (``Workflow.input(name, timeout_s=N)``) is never claimed by a
worker: it ends when someone calls ``provide_input``. With a timeout, the
clock starts when its parents have all ended (migration 0007 sets its
``available_at`` to that instant plus ``timeout_s``). Every
``QUEUE_ENGINE_SWEEP_S`` (with the reaper) the leader fails the overdue ones
(``sql/fail_overdue_inputs.sql``) with the error "input not provided within
N s": an UPDATE of the status, so the workflow trigger cancels the children
that require the input, and releases those whose edge says ``finished``, in
the same statement, exactly as a worker's failure would.

Each statement takes at most ``batch_size`` nodes (oldest deadline first,
through ``jobs_waiting_input_idx``, skipping rows a concurrent
``provide_input`` holds); a run takes at most ``max_batches`` statements. A
value provided after the timeout is refused the usual way: the node has ended
(``provide_input`` answers ``already``), and ``queue-ctl workflows retry ID``
waits for it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queue_engine.foundation import sql as queries
from queue_engine.foundation.logs import log_event, logged_ids
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.reaper import SWEEP_DEFAULT_S
from queue_engine.orchestrator.sweep import SweepService

#: Input nodes failed per statement.
BATCH_SIZE_DEFAULT = 500
#: Statements per run; what is left waits for the next run.
MAX_BATCHES_DEFAULT = 10

log = logging.getLogger("queue_engine.workflows")


@dataclass(frozen=True, slots=True)
class TimedOutInput:
    """One input node failed because its value did not come in time."""

    job_id: int
    workflow_id: int
    node: str
    timeout_s: int


@dataclass(frozen=True, slots=True)
class InputTimeoutResult:
    """What one run failed."""

    timed_out: list[TimedOutInput] = field(default_factory=list)
    batches: int = 0

    @property
    def did_work(self) -> bool:
        """True when an input node was failed."""
        return bool(self.timed_out)

    def log_fields(self) -> dict[str, Any]:
        """How many nodes were failed, in how many statements."""
        return {"timed_out": len(self.timed_out), "batches": self.batches}


class InputTimeouts(SweepService[InputTimeoutResult]):
    """Leader-only service that fails overdue input nodes (and so cancels their children)."""

    name = "input_timeouts"
    interval_default_s = SWEEP_DEFAULT_S
    batch_size_default = BATCH_SIZE_DEFAULT
    max_batches_default = MAX_BATCHES_DEFAULT

    def fail_batch(self, conn: psycopg.Connection[Any]) -> list[TimedOutInput]:
        """Fail one bounded batch (one statement, one transaction); return the nodes failed."""
        rows = conn.execute(
            queries.query("fail_overdue_inputs", self.schema),
            {"now": self.now(), "limit": self.batch_size},
        ).fetchall()
        return [TimedOutInput(int(r[0]), int(r[1]), str(r[2]), int(r[3])) for r in rows]

    def run_once(self) -> InputTimeoutResult:
        """Take batches until one is short or ``max_batches`` ran; log what was failed."""
        failed: list[TimedOutInput] = []
        batches = 0
        try:
            with self.session() as conn:

                def batch() -> bool:
                    nodes = self.fail_batch(conn)
                    failed.extend(nodes)
                    return len(nodes) == self.batch_size

                batches = self.batches(batch)
        finally:
            if failed:
                metrics.count("workflow_inputs_timed_out", len(failed))
                log_event(
                    log,
                    logging.WARNING,
                    "workflow.input_timed_out",
                    count=len(failed),
                    job_ids=logged_ids(n.job_id for n in failed),
                    workflow_ids=logged_ids(sorted({n.workflow_id for n in failed})),
                    nodes=",".join(f"{n.workflow_id}/{n.node}" for n in failed[:20]),
                )
        return InputTimeoutResult(failed, batches)
