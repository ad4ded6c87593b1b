"""References and predicates in a node's args, resolved when the worker claims it.

A node's args are fixed when the workflow starts, but often need what a parent
returned. Instead of reading ``ctx.parent_results`` in the handler, args may
hold small JSON expressions, anywhere in them:

- ``{"$result": "fetch"}`` (the parent's whole result) or ``{"$result":
  "fetch", "path": ["items", 0]}`` (a part of it); ``$from`` is the same
  (queue_workflows' name for it);
- ``{"$status": "fetch"}``: how the parent ended (useful after a
  ``finished`` edge);
- ``{"$value": X}``: X as it is, nothing in it interpreted (data that looks
  like an expression);
- ``{"$filter": LIST, "where": PREDICATE}``: the items of a list for which
  the predicate holds; in it ``{"$item": PATH}`` is the item or a part of it
  (a key, an index, or a list of them; ``[]`` the whole item; a missing part
  is null);
- predicates: ``{"$eq": [A, B]}``, ``{"$ne": [A, B]}`` (JSON equality: 1 equals
  1.0, true does not equal 1), ``{"$and": [P, ...]}``, ``{"$or": [P, ...]}``,
  ``{"$not": P}``.

A predicate under the reserved top-level key ``$skip_if`` decides whether the
node runs at all (``Workflow.add(skip_if=...)``): when it holds, the node ends
``skipped`` without running its handler, and its children follow as for a
handler's ``Skip``. The handler never sees ``$skip_if``.

The worker evaluates all this when it claims the node, which is after its
parents have ended (the node only becomes claimable then), so the handler sees
plain values. One evaluator serves both times: :func:`check` runs it when the
workflow is built, with the parents' names only, so a misspelt operator, a
reference to a node that is not a parent or a misplaced ``$item`` is refused
before anything is written; at the claim, an expression that cannot be
resolved (a parent without a result, a path that is not there) fails the node
at once without running the handler: it would fail the same way every time.
A dict with no operator key is plain data, as before this language grew.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

REF_KEY = "$result"
#: The reserved top-level args key of a node's skip predicate.
SKIP_KEY = "$skip_if"
#: Each operator and the other keys its dict may hold.
OPERATORS: dict[str, frozenset[str]] = {
    "$result": frozenset({"path"}),
    "$from": frozenset({"path"}),
    "$status": frozenset(),
    "$value": frozenset(),
    "$filter": frozenset({"where"}),
    "$item": frozenset(),
    "$eq": frozenset(),
    "$ne": frozenset(),
    "$and": frozenset(),
    "$or": frozenset(),
    "$not": frozenset(),
}
_KEYS = frozenset(OPERATORS) | {SKIP_KEY}
#: A value the check stands in for what is only known at the claim.
_UNKNOWN = object()
_NO_ITEM = object()


class BadReference(ValueError):
    """An expression in a node's args that cannot be resolved (or, when built, is malformed)."""


def result_of(node: str, *path: str | int) -> dict[str, Any]:
    """Build a reference to ``node``'s result (or a part of it, by keys and indexes)."""
    ref: dict[str, Any] = {REF_KEY: node}
    if path:
        ref["path"] = list(path)
    return ref


def has_references(value: Any) -> bool:
    """True when ``value`` holds an expression somewhere (a cheap walk; most args hold none)."""
    if isinstance(value, dict):
        return not _KEYS.isdisjoint(value) or any(has_references(v) for v in value.values())
    if isinstance(value, list):
        return any(has_references(v) for v in value)
    return False


def resolve(args: dict[str, Any], parents: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` with every expression replaced by its value (``$skip_if`` dropped)."""
    scope = _Scope(parents, checking=False)
    body = {k: v for k, v in args.items() if k != SKIP_KEY}
    resolved = scope.eval(body, "args")
    assert isinstance(resolved, dict)
    return resolved


def skip_reason(args: dict[str, Any], parents: Mapping[str, Any]) -> str | None:
    """Why the node is skipped when its ``$skip_if`` holds; None when it runs."""
    predicate = args.get(SKIP_KEY)
    if predicate is None:
        return None
    held = _Scope(parents, checking=False).eval(predicate, "skip_if")
    if not isinstance(held, bool):
        raise BadReference(f"skip_if: must come out true or false, got {held!r}")
    if not held:
        return None
    return f"skip_if held: {json.dumps(predicate, separators=(',', ':'), sort_keys=True)}"


def check(args: Mapping[str, Any], parents: Collection[str]) -> None:
    """Refuse malformed expressions and references to nodes not in ``parents``.

    Raises :class:`BadReference` with the place (``args.x``, ``skip_if``).
    """
    scope = _Scope({name: None for name in parents}, checking=True)
    predicate = args.get(SKIP_KEY)
    if predicate is not None:
        if not isinstance(predicate, dict) or _operator(predicate, "skip_if") is None:
            hint = _did_you_mean(predicate) if isinstance(predicate, dict) else ""
            raise BadReference(
                f"skip_if: must be an expression such as "
                f'{{"$eq": [{{"$result": "<parent>", "path": ["n"]}}, 0]}}, got {predicate!r}'
                f"{hint}"
            )
        if not parents:
            raise BadReference("skip_if: a node without parents has nothing to decide on")
        scope.eval(predicate, "skip_if")
    scope.eval({k: v for k, v in args.items() if k != SKIP_KEY}, "args")


def _operator(value: dict[str, Any], where: str) -> str | None:
    """The operator of ``value`` (checking its other keys), or None for plain data."""
    found = [k for k in value if k in OPERATORS]
    if not found:
        return None
    if len(found) > 1:
        raise BadReference(f"{where}: one operator per object, got {', '.join(found)}")
    op = found[0]
    extra = set(value) - {op} - OPERATORS[op]
    if extra:
        allowed = " and ".join(sorted(OPERATORS[op])) or "nothing else"
        raise BadReference(
            f"{where}: {op} takes {allowed}, not {', '.join(sorted(extra))}"
            f"{_did_you_mean(extra, OPERATORS[op])}"
        )
    return op


def _did_you_mean(keys: Collection[str], also: Collection[str] = ()) -> str:
    for key in sorted(keys):
        close = difflib.get_close_matches(key, [*OPERATORS, *also], n=1, cutoff=0.75)
        if close:
            return f" (did you mean {close[0]}?)"
    return ""


def _same(a: Any, b: Any) -> bool:
    """JSON equality: Python's, except that a boolean never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _step(current: Any, path: list[Any]) -> tuple[bool, Any]:
    """Follow ``path`` (keys and indexes) into ``current``: (found, value)."""
    for key in path:
        in_dict = isinstance(current, dict) and isinstance(key, str) and key in current
        in_list = (
            isinstance(current, list)
            and isinstance(key, int)
            and not isinstance(key, bool)
            and -len(current) <= key < len(current)
        )
        if not (in_dict or in_list):
            return False, None
        current = current[key]
    return True, current


@dataclass(slots=True)
class _Scope:
    """What an expression is evaluated against: the parents, and the item of a ``$filter``.

    ``checking``: only the parents' names are known (the build-time check), so
    what depends on their results is :data:`_UNKNOWN` and every branch is
    walked.
    """

    parents: Mapping[str, Any]
    checking: bool
    item: Any = _NO_ITEM

    def eval(self, value: Any, where: str) -> Any:
        if isinstance(value, list):
            return [self.eval(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        op = _operator(value, where)
        if op is None:
            return {k: self.eval(v, f"{where}.{k}") for k, v in value.items()}
        handler: Callable[[_Scope, Any, dict[str, Any], str], Any] = _HANDLERS[op]
        return handler(self, value[op], value, f"{where}.{op}")

    def parent(self, node: Any, where: str) -> Any:
        if not isinstance(node, str):
            raise BadReference(f"{_site(where)}: names a parent node, got {node!r}")
        if node not in self.parents:
            known = ", ".join(sorted(self.parents)) or "none"
            raise BadReference(
                f"{_site(where)}: {node} is not a parent of this node (parents: {known})"
            )
        return self.parents[node]

    def operands(self, operand: Any, where: str, count: int | None) -> list[Any]:
        if not isinstance(operand, list) or (count is not None and len(operand) != count):
            wanted = f"a list of {count}" if count is not None else "a list"
            raise BadReference(f"{where}: takes {wanted} operands, got {operand!r}")
        return [self.eval(v, f"{where}[{i}]") for i, v in enumerate(operand)]

    def truth(self, value: Any, where: str) -> bool:
        if value is _UNKNOWN:
            return True
        if not isinstance(value, bool):
            raise BadReference(f"{where}: must come out true or false, got {value!r}")
        return value


def _path(raw: Any, where: str) -> list[Any]:
    if isinstance(raw, str | int) and not isinstance(raw, bool):
        return [raw]
    if not isinstance(raw, list) or not all(
        isinstance(k, str | int) and not isinstance(k, bool) for k in raw
    ):
        raise BadReference(f"{where}: path must be a list of keys and indexes, got {raw!r}")
    return raw


def _result(scope: _Scope, node: Any, ref: dict[str, Any], where: str) -> Any:
    parent = scope.parent(node, where)
    path = _path(ref.get("path", []), where)
    if scope.checking:
        return _UNKNOWN
    if parent.get("status") != "succeeded":
        raise BadReference(
            f"{_site(where)}: parent {node} ended "
            f"{parent.get('status')}, so it has no result to use"
        )
    found, value = _step(parent.get("result"), path)
    if not found:
        shown = "".join(f"[{k!r}]" for k in path)
        raise BadReference(f"{_site(where)}: parent {node}'s result has no {shown}")
    return value


def _site(where: str) -> str:
    """The place of a reference without its operator (``args.x``, as the messages always said)."""
    head, _, last = where.rpartition(".")
    return head if last in ("$result", "$from") and head else where


def _status(scope: _Scope, node: Any, _: dict[str, Any], where: str) -> Any:
    parent = scope.parent(node, where)
    return _UNKNOWN if scope.checking else parent.get("status")


def _value(scope: _Scope, literal: Any, _: dict[str, Any], where: str) -> Any:
    return literal


def _item(scope: _Scope, raw: Any, _: dict[str, Any], where: str) -> Any:
    path = _path(raw, where)
    if scope.item is _NO_ITEM:
        raise BadReference(f"{where}: $item is only meaningful inside a $filter's where")
    if scope.item is _UNKNOWN:
        return _UNKNOWN
    return _step(scope.item, path)[1]


def _filter(scope: _Scope, operand: Any, expr: dict[str, Any], where: str) -> Any:
    if "where" not in expr:
        raise BadReference(f'{where}: takes a "where" predicate')
    items = scope.eval(operand, where)
    predicate = expr["where"]
    if items is _UNKNOWN or scope.checking:
        _Scope(scope.parents, scope.checking, _UNKNOWN).eval(predicate, f"{where}.where")
        return _UNKNOWN
    if not isinstance(items, list):
        raise BadReference(f"{where}: filters a list, got {type(items).__name__}")
    kept = []
    for item in items:
        inner = _Scope(scope.parents, False, item)
        if inner.truth(inner.eval(predicate, f"{where}.where"), f"{where}.where"):
            kept.append(item)
    return kept


def _compare(equal: bool) -> Callable[[_Scope, Any, dict[str, Any], str], Any]:
    def compare(scope: _Scope, operand: Any, _: dict[str, Any], where: str) -> Any:
        a, b = scope.operands(operand, where, 2)
        if a is _UNKNOWN or b is _UNKNOWN:
            return _UNKNOWN
        return _same(a, b) is equal

    return compare


def _all_or_any(want_all: bool) -> Callable[[_Scope, Any, dict[str, Any], str], Any]:
    def combine(scope: _Scope, operand: Any, _: dict[str, Any], where: str) -> Any:
        if not isinstance(operand, list) or not operand:
            raise BadReference(f"{where}: takes a non-empty list of predicates, got {operand!r}")
        for i, sub in enumerate(operand):
            # Short-circuit at the claim only: the check walks every branch.
            held = scope.truth(scope.eval(sub, f"{where}[{i}]"), f"{where}[{i}]")
            if not scope.checking and held is not want_all:
                return not want_all
        return _UNKNOWN if scope.checking else want_all

    return combine


def _not(scope: _Scope, operand: Any, _: dict[str, Any], where: str) -> Any:
    held = scope.truth(scope.eval(operand, where), where)
    return _UNKNOWN if scope.checking else not held


_HANDLERS: dict[str, Callable[[_Scope, Any, dict[str, Any], str], Any]] = {
    "$result": _result,
    "$from": _result,
    "$status": _status,
    "$value": _value,
    "$filter": _filter,
    "$item": _item,
    "$eq": _compare(True),
    "$ne": _compare(False),
    "$and": _all_or_any(True),
    "$or": _all_or_any(False),
    "$not": _not,
}
