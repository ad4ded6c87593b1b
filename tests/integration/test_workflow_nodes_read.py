"""Contract: reading a workflow's nodes (``queue-ctl workflows show``) stays linear in its size.

Before, each node's parents were named by joining its edges to ``jobs``; with
the statistics of a table that had just grown by a big workflow (no ANALYZE
yet), the planner ran that join as a scan of every job per node: 20 s for a
10,000-node fan-out. The parents' names now come from one id-to-name map, so
the per-node part of the plan reads ``job_deps`` only, whatever the planner
estimates, and the nodes are read by id. Checked on the plan's shape, not on time.
"""

from __future__ import annotations

import json
from typing import Any

from support.plans import plan_nodes, reads_all_of

from queue_engine import Client, Workflow
from queue_engine.foundation import sql as queries

Q = "wfread"


def relations(plan: dict[str, Any]) -> list[str]:
    found = [plan["Relation Name"]] if "Relation Name" in plan else []
    for child in plan.get("Plans", []):
        found += relations(child)
    return found


def subplans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for child in plan.get("Plans", []):
        if child.get("Parent Relationship") == "SubPlan":
            found.append(child)
        found += subplans(child)
    return found


def test_the_per_node_part_of_the_read_never_touches_jobs(client: Client, conn: Any) -> None:
    wf = Workflow("wide")
    wf.add("fetch", "t", queue=Q)
    parts = [wf.add(f"p-{i}", "t", queue=Q, after=["fetch"]) for i in range(2_000)]
    wf.add("join", "t", queue=Q, after=parts)
    info = client.start_workflow(wf)

    statement = queries.query("workflow_nodes", "queue_engine")
    row = conn.execute(f"EXPLAIN (FORMAT JSON) {statement}", {"id": info.id}).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    per_node = subplans(doc[0]["Plan"])
    assert per_node, "the edges are read per node (a subplan)"
    for sub in per_node:
        assert "jobs" not in relations(sub), json.dumps(sub, indent=1)[:2000]
    # The nodes themselves are read by id, never by a scan of all of jobs.
    whole = [n for n in plan_nodes(doc[0]["Plan"]) if reads_all_of(n, "jobs")]
    assert not whole, whole

    # And the answer is the same as ever: parents by name, in id order.
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert nodes["p-7"].after == [("fetch", "succeeded")]
    assert [p for p, _ in nodes["join"].after] == parts
    assert nodes["fetch"].after == []
