"""The "no stuck workflow node" check: the leader looks for an impossible state and reports it.

A workflow node waits (status ``waiting``) while some parent has not ended;
the statement that ends its last parent queues, cancels or skips it in the
same transaction (migration 0007's trigger). So a waiting node of a running
workflow whose parents have *all* ended is not a condition to recover from: it
is a bug in the engine, and the invariant tests assert it never happens.

Production gets the same check: every ``QUEUE_ENGINE_WORKFLOW_CHECK_S``
(default 60 s; 0 turns it off) the leader runs ``stuck_workflow_nodes()``
(``sql/find_stuck_nodes.sql``). When it finds rows it logs one ERROR line,
``workflow.stuck_node``, with the job ids, workflow ids and node names and a
plea to report it, and it sets the gauge ``queue_engine_workflow_stuck_nodes``
(0 after a clean check); every check counts in
``queue_engine_workflow_stuck_checks_total``. It never *repairs* anything:
queuing such a node would hide the bug that left it there, and the operator
can still decide (``queue-ctl workflows cancel`` or ``retry``) with the report
in hand. The query reads running workflows and their waiting nodes only, so
its cost follows the live work, not the table's history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from queue_engine.foundation import settings as table
from queue_engine.foundation import sql as queries
from queue_engine.foundation.logs import log_event, logged_ids
from queue_engine.orchestrator import metrics
from queue_engine.orchestrator.sweep import SweepService

#: How often the leader checks (seconds); ``QUEUE_ENGINE_WORKFLOW_CHECK_S``.
CHECK_DEFAULT_S = table.WORKFLOW_CHECK_S.default
#: Stuck nodes named in one log line (the total is always given).
REPORTED_MAX = 100

log = logging.getLogger("queue_engine.workflows")


@dataclass(frozen=True, slots=True)
class StuckNode:
    """One node the check found waiting with every parent ended."""

    job_id: int
    workflow_id: int
    node: str
    pending_parents: int | None


@dataclass(frozen=True, slots=True)
class StuckCheckResult:
    """What one check found: the first nodes and how many in all."""

    nodes: list[StuckNode] = field(default_factory=list)
    total: int = 0

    @property
    def did_work(self) -> bool:
        """True when the check found something (an engine bug)."""
        return self.total > 0

    def log_fields(self) -> dict[str, Any]:
        """How many stuck nodes were found."""
        return {"stuck": self.total}


def stuck_hint(result: StuckCheckResult) -> str:
    """What the operator should know and do: this is a bug report, not a recovery."""
    return (
        "workflow nodes are waiting although every parent has ended: the statement that "
        "ended the last parent should have released them. This is a queue-engine bug; please "
        "report it with this line and `queue-ctl workflows show ID` of each workflow. Nothing "
        "was changed: cancel or retry the workflow (`queue-ctl workflows cancel|retry ID`) "
        "to move on."
    )


class StuckNodeCheck(SweepService[StuckCheckResult]):
    """Leader-only service that reports stuck workflow nodes (and never repairs them)."""

    name = "stuck_nodes"
    interval_default_s = CHECK_DEFAULT_S
    batch_size_default = REPORTED_MAX

    def run_once(self) -> StuckCheckResult:
        """Run the check once; log and count what it found."""
        with self.session() as conn:
            rows = conn.execute(
                queries.query("find_stuck_nodes", self.schema), {"limit": self.batch_size}
            ).fetchall()
        nodes = [StuckNode(int(r[0]), int(r[1]), str(r[2]), r[3]) for r in rows]
        total = int(rows[0][4]) if rows else 0
        result = StuckCheckResult(nodes, total)
        metrics.count("workflow_stuck_checks")
        metrics.set_gauge("workflow_stuck_nodes", total)
        if total:
            log_event(
                log,
                logging.ERROR,
                "workflow.stuck_node",
                count=total,
                job_ids=logged_ids(n.job_id for n in nodes),
                workflow_ids=logged_ids(sorted({n.workflow_id for n in nodes})),
                nodes=",".join(f"{n.workflow_id}/{n.node}" for n in nodes[:20]),
                hint=stuck_hint(result),
            )
        return result
