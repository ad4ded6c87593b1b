"""The expression language of a workflow node's args and ``skip_if`` (pure, no database).

Checked when the workflow is built (operators, arity, references to parents,
``$item`` placement), evaluated at the claim against the parents' statuses and
results: ``$result``/``$from`` with paths, ``$status``, ``$value`` taken
literally, ``$filter`` with ``$item``, ``$eq``/``$ne`` with JSON equality,
``$and``/``$or``/``$not``; a dict without an operator stays plain data. The
worker running it is checked in tests/integration/test_workflow_expressions.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from queue_engine import Workflow
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.workflows import refs

FILES = [
    {"name": "a.pdf", "kind": "pdf", "size": 3},
    {"name": "b.csv", "kind": "csv", "size": 0},
    {"name": "c.csv", "kind": "csv"},
]
PARENTS: dict[str, Any] = {
    "fetch": {"status": "succeeded", "result": {"files": FILES, "count": 3, "ok": True}},
    "probe": {"status": "failed", "result": None},
}


def item(*path: str | int) -> dict[str, Any]:
    return {"$item": list(path)}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ({"$result": "fetch", "path": ["count"]}, 3),
        ({"$from": "fetch", "path": ["files", -1, "name"]}, "c.csv"),
        ({"$status": "probe"}, "failed"),
        ({"$value": {"$result": "fetch"}}, {"$result": "fetch"}),
        ({"$eq": [{"$result": "fetch", "path": ["count"]}, 3.0]}, True),
        ({"$eq": [{"$result": "fetch", "path": ["ok"]}, 1]}, False),
        ({"$ne": [{"$status": "probe"}, "succeeded"]}, True),
        ({"$eq": [[1, {"a": True}], [1, {"a": True}]]}, True),
        ({"$eq": [[1, {"a": True}], [1, {"a": 1}]]}, False),
        ({"$and": [{"$eq": [1, 1]}, {"$result": "fetch", "path": ["ok"]}]}, True),
        ({"$or": [{"$eq": [1, 2]}, {"$not": {"$eq": [1, 2]}}]}, True),
        (
            {
                "$filter": {"$result": "fetch", "path": ["files"]},
                "where": {"$eq": [item("kind"), "csv"]},
            },
            FILES[1:],
        ),
        (
            {
                "$filter": {"$from": "fetch", "path": ["files"]},
                "where": {"$ne": [item("size"), None]},
            },
            FILES[:2],
        ),
        ({"$filter": [1, 2, 1], "where": {"$eq": [item(), 1]}}, [1, 1]),
        (
            {"plain": {"$set": 1}, "list": [{"$status": "fetch"}]},
            {"plain": {"$set": 1}, "list": ["succeeded"]},
        ),
    ],
)
def test_expressions_evaluate_against_the_parents(expression: Any, expected: Any) -> None:
    assert refs.resolve({"x": expression}, PARENTS) == {"x": expected}


def test_or_and_and_stop_at_the_first_deciding_operand() -> None:
    # The second operand would fail (probe has no result): never reached.
    failing = {"$eq": [{"$result": "probe"}, 1]}
    assert refs.resolve({"x": {"$or": [{"$eq": [1, 1]}, failing]}}, PARENTS) == {"x": True}
    assert refs.resolve({"x": {"$and": [{"$eq": [1, 2]}, failing]}}, PARENTS) == {"x": False}


def test_skip_if_is_dropped_from_the_args_and_decides_the_skip() -> None:
    args = {"n": 1, refs.SKIP_KEY: {"$eq": [{"$result": "fetch", "path": ["count"]}, 3]}}
    assert refs.resolve(args, PARENTS) == {"n": 1}
    assert refs.skip_reason(args, PARENTS) == (
        'skip_if held: {"$eq":[{"$result":"fetch","path":["count"]},3]}'
    )
    args[refs.SKIP_KEY] = {"$ne": [{"$result": "fetch", "path": ["count"]}, 3]}
    assert refs.skip_reason(args, PARENTS) is None
    assert refs.skip_reason({"n": 1}, PARENTS) is None


def test_has_references_sees_every_operator_and_skip_if_but_not_plain_data() -> None:
    assert refs.has_references({"a": [{"b": {"$filter": [], "where": {}}}]})
    assert refs.has_references({refs.SKIP_KEY: {"$eq": [1, 1]}})
    assert not refs.has_references({"a": [{"$set": 1}], "b": "$result"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"x": {"$result": "probe"}},
            "args.x: parent probe ended failed, so it has no result to use",
        ),
        (
            {"x": {"$result": "fetch", "path": ["files", 9]}},
            "args.x: parent fetch's result has no ['files'][9]",
        ),
        (
            {"x": {"$from": "nope"}},
            "args.x: nope is not a parent of this node (parents: fetch, probe)",
        ),
        (
            {"x": {"$filter": {"$result": "fetch", "path": ["count"]}, "where": {"$eq": [1, 1]}}},
            "args.x.$filter: filters a list, got int",
        ),
        (
            {"x": {"$filter": [1], "where": item()}},
            "args.x.$filter.where: must come out true or false, got 1",
        ),
        (
            {refs.SKIP_KEY: {"$result": "fetch", "path": ["count"]}},
            "skip_if: must come out true or false, got 3",
        ),
    ],
)
def test_what_cannot_be_resolved_at_the_claim_says_where_and_why(args: Any, message: str) -> None:
    with pytest.raises(refs.BadReference) as caught:
        refs.skip_reason(args, PARENTS)
        refs.resolve(args, PARENTS)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"skip_if": {"$eqq": [1, 1]}}, "skip_if: must be an expression such as"),
        ({"skip_if": {"$eqq": [1, 1]}}, "(did you mean $eq?)"),
        ({"skip_if": "fetch"}, "skip_if: must be an expression"),
        (
            {"skip_if": {"$eq": [{"$result": "other"}, 1]}},
            "skip_if.$eq[0]: other is not a parent of this node (parents: fetch)",
        ),
        ({"skip_if": {"$eq": [1]}}, "skip_if.$eq: takes a list of 2 operands, got [1]"),
        ({"skip_if": {"$and": []}}, "skip_if.$and: takes a non-empty list of predicates"),
        ({"skip_if": {"$not": 3}}, "skip_if.$not: must come out true or false, got 3"),
        (
            {"args": {"x": {"$item": "kind"}}},
            "args.x.$item: $item is only meaningful inside a $filter's where",
        ),
        (
            {"args": {"x": {"$filter": [], "where": {"$eq": [{"$status": "zz"}, 1]}}}},
            "zz is not a parent",
        ),
        ({"args": {"x": {"$filter": []}}}, 'args.x.$filter: takes a "where" predicate'),
        (
            {"args": {"x": {"$result": "fetch", "paht": [1]}}},
            "$result takes path, not paht (did you mean path?)",
        ),
        ({"args": {"x": {"$eq": [1, 1], "$ne": [1, 2]}}}, "one operator per object, got $eq, $ne"),
        (
            {"args": {"x": {"$result": "fetch", "path": [True]}}},
            "path must be a list of keys and indexes",
        ),
        (
            {"args": {refs.SKIP_KEY: {"$eq": [1, 1]}}, "skip_if": {"$eq": [1, 1]}},
            "skip_if is given twice",
        ),
    ],
)
def test_a_bad_expression_is_refused_when_the_workflow_is_built(
    options: dict[str, Any], message: str
) -> None:
    wf = Workflow("checked")
    wf.add("fetch", "t")
    with pytest.raises(ValidationError) as caught:
        wf.add("use", "t", after=["fetch"], **options)
    assert str(caught.value).startswith("workflow checked, node use: ")
    assert message in str(caught.value)
    assert wf.node_names == ["fetch"]


def test_skip_if_needs_parents_and_is_stored_in_the_args() -> None:
    wf = Workflow("stored")
    with pytest.raises(ValidationError, match="a node without parents has nothing to decide on"):
        wf.add("root", "t", skip_if={"$eq": [1, 1]})
    wf.add("root", "t")
    predicate = {"$eq": [{"$status": "root"}, "failed"]}
    wf.add("child", "t", after=["root"], args={"n": 1}, skip_if=predicate)
    assert '"args": {"n": 1, "$skip_if": {"$eq": [{"$status": "root"}, "failed"]}}' in wf.payload()
