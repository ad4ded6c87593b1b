"""What queue_workflows' users declared, run by a real worker (the testing kit's drain).

Contracts: a node whose ``skip_if`` holds ends ``skipped`` without running
its handler, its children follow as for a handler's ``Skip``, and a node whose
``skip_if`` does not hold runs; a child receives a ``$filter``ed list and a
``$value`` literally; a workflow is started by the name of its provider, and
an unknown name or bad params write nothing. The language itself is checked
in tests/unit/test_workflow_refs.py.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from support.nodes import registry, statuses

from queue_engine import Client, Workflow, finished, workflow
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.context import JobContext
from queue_engine.testing import drain

Q = "wfx"
FILES = [
    {"name": "a.pdf", "kind": "pdf"},
    {"name": "b.csv", "kind": "csv"},
    {"name": "c.csv", "kind": "csv"},
]


def listing(args: dict[str, Any], ctx: JobContext) -> Any:
    return {"files": FILES if args.get("full") else [], "count": 3 if args.get("full") else 0}


def echo(args: dict[str, Any], ctx: JobContext) -> Any:
    return args


def count_of(node: str) -> dict[str, Any]:
    return {"$result": node, "path": ["count"]}


def test_a_node_whose_skip_if_holds_is_skipped_without_running_and_skips_its_children(
    client: Client,
) -> None:
    ran: list[str] = []

    def work(args: dict[str, Any], ctx: JobContext) -> Any:
        ran.append(str(ctx.node))
        return args

    wf = Workflow("skippy")
    wf.add("fetch", "listing", queue=Q, args={"full": False})
    # Its args would not resolve (no files[0]): skip_if is decided first.
    empty = {"$eq": [count_of("fetch"), 0]}
    wf.add(
        "load",
        "work",
        queue=Q,
        after=["fetch"],
        skip_if=empty,
        args={"first": {"$result": "fetch", "path": ["files", 0]}},
    )
    wf.add("index", "work", queue=Q, after=["load"])
    wf.add("report", "work", queue=Q, after=[finished("load")], args={"load": {"$status": "load"}})
    wf.add("audit", "work", queue=Q, after=["fetch"], skip_if={"$ne": [count_of("fetch"), 0]})
    info = client.start_workflow(wf)
    drain(client, queue=Q, tasks=registry(Q, listing=listing, work=work))

    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert statuses(client, info.id) == {
        "fetch": "succeeded",
        "load": "skipped",
        "index": "skipped",
        "report": "succeeded",
        "audit": "succeeded",
    }
    assert sorted(ran) == ["audit", "report"]
    assert nodes["load"].result == {
        "skipped": 'skip_if held: {"$eq":[{"$result":"fetch","path":["count"]},0]}'
    }
    assert nodes["index"].error == "skipped: upstream node load skipped"
    assert nodes["report"].result == {"load": "skipped"}
    assert nodes["audit"].result == {}  # the handler never sees $skip_if
    assert client.get_workflow(info.id).state == "succeeded"


def test_a_child_receives_a_filtered_list_and_a_literal_value(client: Client) -> None:
    wf = Workflow("filtered")
    wf.add("fetch", "listing", queue=Q, args={"full": True})
    csv = {"$eq": [{"$item": "kind"}, "csv"]}
    wf.add(
        "load",
        "echo",
        queue=Q,
        after=["fetch"],
        args={
            "csv": {"$filter": {"$from": "fetch", "path": ["files"]}, "where": csv},
            "names": {"$filter": ["a", "b"], "where": {"$ne": [{"$item": []}, "a"]}},
            "raw": {"$value": {"$result": "fetch"}},
        },
    )
    root = Workflow("root-values")
    root.add(
        "only",
        "echo",
        queue=Q,
        args={"raw": {"$value": {"$eq": [1, 2]}}, "same": {"$eq": [1, 1.0]}},
    )
    info, root_info = client.start_workflow(wf), client.start_workflow(root)
    drain(client, queue=Q, tasks=registry(Q, listing=listing, echo=echo))

    load = next(n for n in client.workflow_nodes(info.id) if n.node == "load")
    assert load.status == "succeeded"
    assert load.result == {"csv": FILES[1:], "names": ["b"], "raw": {"$result": "fetch"}}
    only = client.workflow_nodes(root_info.id)[0]
    assert only.result == {"raw": {"$eq": [1, 2]}, "same": True}


def test_a_workflow_started_with_sql_and_a_bad_skip_if_fails_that_node_at_the_claim(
    client: Client, dsn: str
) -> None:
    # SQL and other languages skip the build-time check: the claim says what is wrong.
    wf = Workflow("late-check")
    wf.add("fetch", "listing", queue=Q)
    wf.add("load", "echo", queue=Q, after=["fetch"], skip_if={"$eq": [count_of("fetch"), 0]})
    payload = wf.payload().replace('"$eq"', '"$eqq"')
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT workflow_id FROM queue_engine.start_workflow(%s, %s::jsonb)",
            ("late-check", payload),
        ).fetchone()
    assert row is not None
    drain(client, queue=Q, tasks=registry(Q, listing=listing, echo=echo))
    load = next(n for n in client.workflow_nodes(row[0]) if n.node == "load")
    assert load.status == "failed"
    assert load.error == (
        "bad reference in args: skip_if: must come out true or false, got {'$eqq': [0, 0]}"
    )


@workflow("named-etl")
def named_etl(params: dict[str, Any]) -> Workflow:
    day = params["day"]
    wf = Workflow("named-etl", idempotency_key=f"named-etl:{day}")
    wf.add("fetch", "listing", queue=Q, args={"full": True})
    wf.add("load", "echo", queue=Q, after=["fetch"], args={"day": day, "n": count_of("fetch")})
    return wf


def test_a_workflow_is_started_by_its_providers_name(client: Client) -> None:
    info = client.start_workflow("named-etl", {"day": "2026-11-23"})
    assert info.created and info.name == "named-etl" and info.node_count == 2
    again = client.start_workflow("named-etl", {"day": "2026-11-23"})
    assert again.id == info.id and not again.created
    drain(client, queue=Q, tasks=registry(Q, listing=listing, echo=echo))
    load = next(n for n in client.workflow_nodes(info.id) if n.node == "load")
    assert load.result == {"day": "2026-11-23", "n": 3}


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("nope", {}, "no workflow provider named 'nope' (known: "),
        ("named-etl", {}, "workflow provider named-etl refused its params: KeyError: 'day'"),
        ("named-etl", [1], "workflow named-etl: params must be a JSON object, got list"),
    ],
)
def test_an_unknown_name_or_bad_params_write_nothing(
    client: Client, name: str, params: Any, message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        client.start_workflow(name, params)
    assert message in str(caught.value)
    assert client.list_workflows() == []
