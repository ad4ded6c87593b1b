"""Workflows: DAGs of jobs whose children become claimable in the statement
that ends their last parent (migration 0007, docs/guides/workflows.md).

:class:`Workflow` builds one (nodes, edges, input nodes) and checks it before
anything is written; ``Client.start_workflow`` inserts it in one call.
"""

from __future__ import annotations

from queue_engine.producer.workflows.model import NodeInfo, WorkflowInfo, WorkflowState
from queue_engine.producer.workflows.spec import INPUT_TASK, After, Workflow, finished

__all__ = [
    "INPUT_TASK",
    "After",
    "NodeInfo",
    "Workflow",
    "WorkflowInfo",
    "WorkflowState",
    "finished",
]
