"""References in a node's args to a parent's result.

A node's args are fixed when the workflow starts, but often need what a parent
returned. Instead of reading ``ctx.parent_results`` in the handler, args may
hold a reference, ``{"$result": "fetch"}`` (the parent's whole result) or
``{"$result": "fetch", "path": ["items", 0]}`` (a part of it), anywhere in the
args. The worker replaces each one when it claims the node, which is after
its parents have ended (the node only becomes claimable then), so the handler
sees plain values. A reference that cannot be resolved (not a parent, a parent
without a result, a path that is not there) fails the node at once with a
message that says which, without running the handler: it would fail the same
way on every attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

REF_KEY = "$result"


class BadReference(ValueError):
    """A ``$result`` reference in a node's args that cannot be resolved."""


def result_of(node: str, *path: str | int) -> dict[str, Any]:
    """Build a reference to ``node``'s result (or a part of it, by keys and indexes)."""
    ref: dict[str, Any] = {REF_KEY: node}
    if path:
        ref["path"] = list(path)
    return ref


def has_references(value: Any) -> bool:
    """True when ``value`` holds a reference somewhere (a cheap walk; most args hold none)."""
    if isinstance(value, dict):
        return REF_KEY in value or any(has_references(v) for v in value.values())
    if isinstance(value, list):
        return any(has_references(v) for v in value)
    return False


def resolve(args: dict[str, Any], parents: dict[str, Any]) -> dict[str, Any]:
    """``args`` with every reference replaced by the parent's result it names."""
    resolved = _resolve(args, parents, "args")
    assert isinstance(resolved, dict)
    return resolved


def _resolve(value: Any, parents: dict[str, Any], where: str) -> Any:
    if isinstance(value, dict):
        if REF_KEY in value:
            return _lookup(value, parents, where)
        return {k: _resolve(v, parents, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, parents, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _lookup(ref: dict[str, Any], parents: dict[str, Any], where: str) -> Any:
    node = ref[REF_KEY]
    extra = set(ref) - {REF_KEY, "path"}
    if not isinstance(node, str) or extra:
        raise BadReference(
            f'{where}: a reference is {{"$result": "<parent node>", "path": [...]}}, got {ref!r}'
        )
    if node not in parents:
        known = ", ".join(sorted(parents)) or "none"
        raise BadReference(f"{where}: {node} is not a parent of this node (parents: {known})")
    parent = parents[node]
    if parent.get("status") != "succeeded":
        raise BadReference(
            f"{where}: parent {node} ended {parent.get('status')}, so it has no result to use"
        )
    path = ref.get("path", [])
    if not isinstance(path, Sequence) or isinstance(path, str):
        raise BadReference(f"{where}: path must be a list of keys and indexes, got {path!r}")
    current = parent.get("result")
    for step, key in enumerate(path):
        try:
            current = current[key]
        except (KeyError, IndexError, TypeError):
            shown = "".join(f"[{k!r}]" for k in path[: step + 1])
            raise BadReference(f"{where}: parent {node}'s result has no {shown}") from None
    return current
