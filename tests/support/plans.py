"""Reading Postgres plans (EXPLAIN ... FORMAT JSON) in tests: asserting a plan's shape, not a time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of a plan, the root first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)


def reads_all_of(node: dict[str, Any], relation: str) -> bool:
    """Whether the node reads all of ``relation``: a sequential scan, or an
    index scan with no condition (the planner's stand-in for one when
    ``enable_seqscan`` is off, as in a worker's session)."""
    return node.get("Relation Name") == relation and (
        node["Node Type"] == "Seq Scan"
        or (node["Node Type"] in ("Index Scan", "Index Only Scan") and "Index Cond" not in node)
    )
