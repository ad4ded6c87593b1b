"""How an unfinished queue_workflows run becomes a workflow of this engine: pure rules.

A run half done there must continue here: its finished nodes' results
available to their children, its unfinished nodes waiting or queued. The
engine's own ``start_workflow`` builds the DAG (edges, gates, tallies: no
second way to write them), so a run is rewritten as a node list:

- a **completed** or **skipped** node becomes an input node
  (``queue-engine:input``) that the importer then gives the node's result
  (``context_delta``; a skipped node's is null) through ``provide_input``:
  it ends succeeded with that result, and its children see it in
  ``ctx.parents`` as any parent's. queue_workflows runs the children of a
  skipped node (a dependency counts as met when completed or skipped), so
  succeeded keeps that;
- a node **awaiting input** stays an input node waiting for its value
  (``queue-ctl provide`` or the API gives it);
- a **pending**, **queued** or **running** node becomes a node of its task
  (``node_module``) on its queue (``cpu``/``gpu``) with its ``inputs`` as its
  args and its ``required_model`` as its affinity key (a worker with that model
  warm takes it first); its spent attempts are carried after the start
  (``import_node_attempts.sql``), a running one's counted as spent;
- a run with a **failed** or **cancelled** node is not moved: there it ends
  failed (or is being cancelled); retry it there, or start it anew here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from queue_engine.foundation.errors import ValidationError
from queue_engine.operator.importing.convert import Refusal, attempts_of
from queue_engine.producer.validation import check_queue_name, check_task_name

INPUT_TASK = "queue-engine:input"
FINISHED = frozenset({"completed", "skipped"})
UNFINISHED = frozenset({"pending", "queued", "running"})
ENDED_BADLY = frozenset({"failed", "cancelled"})


@dataclass(frozen=True)
class WorkflowPlan:
    """What the importer sends for one run: ``start_workflow``'s nodes, then the rest."""

    old_id: str
    status: str
    name: str
    #: start_workflow's node list (parents always earlier).
    nodes: list[dict[str, Any]]
    #: (node, result as JSON text) of finished nodes, parents first: provide_input's calls.
    provided: list[tuple[str, str]] = field(default_factory=list)
    #: (node, attempts spent, last error) of unfinished nodes.
    attempts: list[tuple[str, int, str | None]] = field(default_factory=list)


def _ordered(nodes: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The nodes with every parent before its children (stable: source order otherwise)."""
    by_name = {str(n["node"]): n for n in nodes}
    done: dict[str, None] = {}
    pending = list(nodes)
    while pending:
        ready = [n for n in pending if all(p in done for p in n["depends_on"] or [])]
        if not ready:
            unknown = sorted(
                {p for n in pending for p in n["depends_on"] or [] if p not in by_name}
            )
            if unknown:
                raise ValidationError(f"its nodes depend on unknown nodes: {', '.join(unknown)}")
            raise ValidationError("its nodes depend on each other in a cycle")
        for n in ready:
            done[str(n["node"])] = None
        pending = [n for n in pending if str(n["node"]) not in done]
    return [by_name[name] for name in done]


def plan_run(run: Mapping[str, Any]) -> WorkflowPlan | Refusal:
    """The plan of one queued or running run (its ``nodes`` as ``import_source_qw_runs.sql``)."""
    old_id, status = str(run["old_id"]), str(run["status"])
    nodes: list[Mapping[str, Any]] = list(run["nodes"] or [])
    try:
        if not nodes:
            raise ValidationError("it has no node-jobs yet (its orchestrator never expanded it)")
        bad = [n for n in nodes if n["status"] in ENDED_BADLY]
        if bad:
            raise ValidationError(
                f"node {bad[0]['node']} is {bad[0]['status']}: the run ends failed there"
            )
        plan = WorkflowPlan(old_id=old_id, status=status, name=str(run["workflow_name"]), nodes=[])
        for node in _ordered(nodes):
            name = str(node["node"])
            after = [{"node": str(p)} for p in node["depends_on"] or []]
            spec: dict[str, Any] = {"node": name}
            if after:
                spec["after"] = after
            if node["status"] in FINISHED:
                spec["task"] = INPUT_TASK
                result = node["result"] if node["status"] == "completed" else None
                plan.provided.append((name, json.dumps(result)))
            elif node["status"] == "awaiting_input":
                spec["task"] = INPUT_TASK
            elif node["status"] in UNFINISHED:
                spec["task"] = check_task_name(str(node["task"]))
                spec["queue"] = check_queue_name(str(node["queue"]))
                args = node["inputs"] if node["inputs"] is not None else {}
                if not isinstance(args, dict):
                    raise ValidationError(f"node {name}: its inputs are not a JSON object")
                spec["args"] = args
                attempt, limit = attempts_of(node["attempts"], node["max_attempts"])
                if limit is not None:
                    spec["max_attempts"] = limit
                if node.get("required_model"):
                    # The warm model it needs: this engine's affinity key.
                    spec["affinity_key"] = str(node["required_model"])
                plan.attempts.append((name, attempt, node["error"]))
            else:
                raise ValidationError(f"node {name} has an unknown status {node['status']!r}")
            plan.nodes.append(spec)
        return plan
    except (ValidationError, TypeError, ValueError, KeyError) as exc:
        return Refusal(old_id=old_id, status=status, reason=str(exc))
