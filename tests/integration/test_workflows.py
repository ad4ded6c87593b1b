"""Workflows on a real database, run by a real worker (the testing kit's drain).

Contracts: a workflow starts atomically (every node or none, on the caller's
transaction too) and idempotently; a bad shape writes nothing; a child is
queued by the statement that ends its last parent; results and references
reach children; failure cancels (or skips) descendants with the upstream node
named, a ``finished`` edge runs anyway; input nodes, cancel and retry; the
workflow row's state and counts follow without scanning its jobs.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from support.nodes import statuses

from queue_engine import After, Client, Permanent, Skip, Workflow, finished, result_of
from queue_engine.foundation.errors import InvalidTransition, ValidationError, WorkflowNotFound
from queue_engine.producer.context import JobContext
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import drain

Conn = psycopg.Connection[Any]
Q = "wf"


def registry(**handlers: Any) -> TaskRegistry:
    reg = TaskRegistry()
    for name, fn in handlers.items():
        reg.register(
            TaskDefinition(name=name, handler=fn, queue=Q, max_attempts=1, wants_context=True)
        )
    return reg


def ok(args: dict[str, Any], ctx: JobContext) -> Any:
    return {"node": ctx.node, "args": args, "parents": ctx.parent_results}


def boom(args: dict[str, Any], ctx: JobContext) -> Any:
    raise Permanent("boom")


def skip(args: dict[str, Any], ctx: JobContext) -> Any:
    raise Skip("nothing to do today")


def diamond(name: str = "diamond", **kw: Any) -> Workflow:
    wf = Workflow(name, **kw)
    wf.add("fetch", "ok", queue=Q, args={"day": 1})
    wf.add("left", "ok", queue=Q, after=["fetch"])
    wf.add("right", "ok", queue=Q, after=["fetch"])
    wf.add("join", "ok", queue=Q, after=["left", "right"])
    return wf


def test_start_inserts_every_node_with_only_the_roots_queued(client: Client) -> None:
    info = client.start_workflow(diamond())
    assert info.created and info.state == "running" and info.node_count == 4
    assert info.counts["unfinished"] == 4
    assert statuses(client, info.id) == {
        "fetch": "queued",
        "left": "waiting",
        "right": "waiting",
        "join": "waiting",
    }
    join = next(n for n in client.workflow_nodes(info.id) if n.node == "join")
    assert join.after == [("left", "succeeded"), ("right", "succeeded")]
    assert join.pending_parents == 2


def test_a_diamond_runs_in_order_and_children_see_parents_results(client: Client) -> None:
    info = client.start_workflow(diamond())
    order: list[str] = []

    def track(args: dict[str, Any], ctx: JobContext) -> Any:
        order.append(str(ctx.node))
        return ok(args, ctx)

    drain(client, queue=Q, tasks=registry(ok=track))
    assert order[0] == "fetch" and order[-1] == "join"
    assert sorted(order[1:3]) == ["left", "right"]
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert nodes["join"].result["parents"]["left"]["node"] == "left"
    assert set(nodes["join"].result["parents"]) == {"left", "right"}
    done = client.get_workflow(info.id)
    assert done.state == "succeeded" and done.finished_at is not None
    assert done.counts == {
        "unfinished": 0,
        "succeeded": 4,
        "failed": 0,
        "canceled": 0,
        "lost": 0,
        "skipped": 0,
    }


def test_the_child_is_queued_by_the_statement_that_ends_its_last_parent(
    client: Client, conn: Conn
) -> None:
    info = client.start_workflow(diamond())
    ids = {n.node: n.job_id for n in client.workflow_nodes(info.id)}
    for node in ("fetch", "left", "right"):
        conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (ids[node],))
        conn.execute(
            "UPDATE queue_engine.jobs SET status = 'succeeded', finished_at = now() WHERE id = %s",
            (ids[node],),
        )
        expected = "queued" if node == "right" else "waiting"
        assert statuses(client, info.id)["join"] == expected


def test_idempotency_key_returns_the_existing_workflow_and_writes_nothing(
    client: Client, conn: Conn
) -> None:
    first = client.start_workflow(diamond(idempotency_key="nightly:1"))
    again = client.start_workflow(diamond(idempotency_key="nightly:1"))
    assert again.id == first.id and first.created and not again.created
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 4


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda wf: (wf.add("a", "ok", after=["b"]), wf.add("b", "ok", after=["a"])), "cycle"),
        (lambda wf: wf.add("a", "ok", after=["nope"]), "after names nope"),
        (lambda wf: (wf.add("a", "ok"), wf.add("a", "ok")), "already added"),
        (lambda wf: wf.add("a", "ok", after=["a"]), "after itself"),
        (lambda wf: wf.add("a", "ok", dedupe_key="k"), "cannot carry dedupe_key"),
        (lambda wf: wf.add("a", "ok", priority=5000), "priority"),
        (lambda wf: wf.add("a", "ok", after=[After("x", "sometimes")]), "requires"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_shape_is_refused_before_anything_is_written(
    client: Client, conn: Conn, build: Any, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        wf = Workflow("bad")
        build(wf)
        client.start_workflow(wf)
    assert conn.execute("SELECT count(*) FROM queue_engine.workflows").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 0


def test_a_cycle_is_named(client: Client) -> None:
    wf = Workflow("loop")
    wf.add("a", "ok", after=["c"])
    wf.add("b", "ok", after=["a"])
    wf.add("c", "ok", after=["b"])
    with pytest.raises(ValidationError, match=r"cycle: a <- c <- b <- a"):
        client.start_workflow(wf)


def test_on_the_callers_connection_the_workflow_exists_iff_it_commits(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        bound = Client(conn=conn)
        info = bound.start_workflow(diamond())
        conn.rollback()
        with pytest.raises(WorkflowNotFound):
            bound.get_workflow(info.id)
        assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone()[0] == 0
        info = bound.start_workflow(diamond())
        conn.commit()
    with Client(dsn) as other:
        assert other.get_workflow(info.id).node_count == 4


def test_a_failed_parent_cancels_descendants_naming_it_and_a_finished_edge_runs_anyway(
    client: Client,
) -> None:
    wf = Workflow("etl")
    wf.add("fetch", "boom", queue=Q)
    wf.add("parse", "ok", queue=Q, after=["fetch"])
    wf.add("load", "ok", queue=Q, after=["parse"])
    wf.add("report", "ok", queue=Q, after=[finished("fetch")])
    info = client.start_workflow(wf)
    drain(client, queue=Q, tasks=registry(ok=ok, boom=boom))
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert {k: v.status for k, v in nodes.items()} == {
        "fetch": "failed",
        "parse": "canceled",
        "load": "canceled",
        "report": "succeeded",
    }
    assert nodes["load"].error == "canceled: upstream node fetch failed"
    assert nodes["report"].result["parents"] == {"fetch": None}
    final = client.get_workflow(info.id)
    assert final.state == "failed"
    assert final.counts["canceled"] == 2 and final.counts["failed"] == 1


def test_a_skipped_parent_skips_children_that_require_success(client: Client) -> None:
    wf = Workflow("maybe")
    wf.add("check", "skip", queue=Q)
    wf.add("work", "ok", queue=Q, after=["check"])
    wf.add("always", "ok", queue=Q, after=[finished("check")])
    info = client.start_workflow(wf)
    drain(client, queue=Q, tasks=registry(ok=ok, skip=skip))
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert nodes["check"].status == "skipped"
    assert nodes["check"].result == {"skipped": "nothing to do today"}
    assert nodes["work"].status == "skipped"
    assert nodes["work"].error == "skipped: upstream node check skipped"
    assert nodes["always"].status == "succeeded"
    assert client.get_workflow(info.id).state == "succeeded"


def test_args_references_resolve_to_parent_results(client: Client) -> None:
    def produce(args: dict[str, Any], ctx: JobContext) -> Any:
        return {"items": [{"id": 7}, {"id": 8}]}

    def consume(args: dict[str, Any], ctx: JobContext) -> Any:
        return args

    wf = Workflow("refs")
    wf.add("produce", "produce", queue=Q)
    wf.add(
        "consume",
        "consume",
        queue=Q,
        after=["produce"],
        args={"second": result_of("produce", "items", 1, "id"), "all": result_of("produce")},
    )
    wf.add(
        "broken", "consume", queue=Q, after=["produce"], args={"x": result_of("produce", "nope")}
    )
    info = client.start_workflow(wf)
    drain(client, queue=Q, tasks=registry(produce=produce, consume=consume))
    nodes = {n.node: n for n in client.workflow_nodes(info.id)}
    assert nodes["consume"].result == {"second": 8, "all": {"items": [{"id": 7}, {"id": 8}]}}
    assert nodes["broken"].status == "failed"
    assert (
        nodes["broken"].error
        == "bad reference in args: args.x: parent produce's result has no ['nope']"
    )


def test_an_input_node_waits_for_its_value_then_releases_its_children(client: Client) -> None:
    wf = Workflow("approval")
    wf.add("prepare", "ok", queue=Q)
    wf.input("approve", after=["prepare"])
    wf.add("publish", "ok", queue=Q, after=["approve"])
    info = client.start_workflow(wf)
    with pytest.raises(InvalidTransition, match="not awaiting input yet"):
        client.provide_input(info.id, "approve", {"by": "ana"})
    drain(client, queue=Q, tasks=registry(ok=ok))
    assert statuses(client, info.id) == {
        "prepare": "succeeded",
        "approve": "waiting",
        "publish": "waiting",
    }
    assert client.provide_input(info.id, "approve", {"by": "ana"}) is True
    assert client.provide_input(info.id, "approve", {"by": "bob"}) is False
    with pytest.raises(InvalidTransition, match="not an input node"):
        client.provide_input(info.id, "prepare", 1)
    with pytest.raises(WorkflowNotFound):
        client.provide_input(info.id, "nope", 1)
    drain(client, queue=Q, tasks=registry(ok=ok))
    publish = next(n for n in client.workflow_nodes(info.id) if n.node == "publish")
    assert publish.result["parents"] == {"approve": {"by": "ana"}}
    assert client.get_workflow(info.id).state == "succeeded"


def test_cancel_ends_every_unfinished_node_and_retry_reruns_only_what_did_not_succeed(
    client: Client,
) -> None:
    info = client.start_workflow(diamond())
    drain(client, queue=Q, tasks=registry(ok=ok), limit=1)  # fetch only
    assert client.cancel_workflow(info.id) == (3, 0)
    after_cancel = client.get_workflow(info.id)
    assert after_cancel.state == "canceled"
    assert statuses(client, info.id) == {
        "fetch": "succeeded",
        "left": "canceled",
        "right": "canceled",
        "join": "canceled",
    }
    assert client.retry_workflow(info.id) == 3
    assert client.get_workflow(info.id).state == "running"
    assert statuses(client, info.id) == {
        "fetch": "succeeded",
        "left": "queued",
        "right": "queued",
        "join": "waiting",
    }
    runs = drain(client, queue=Q, tasks=registry(ok=ok))
    assert len(runs) == 3  # fetch did not run again
    assert client.get_workflow(info.id).state == "succeeded"


def test_a_single_node_cannot_be_retried_alone(client: Client) -> None:
    wf = Workflow("one")
    wf.add("only", "boom", queue=Q)
    info = client.start_workflow(wf)
    drain(client, queue=Q, tasks=registry(boom=boom))
    job_id = client.workflow_nodes(info.id)[0].job_id
    with pytest.raises(InvalidTransition, match="retry the workflow"):
        client.retry(job_id)


def test_a_wide_fan_in_counts_through_gates(client: Client, conn: Conn) -> None:
    wf = Workflow("wide")
    parents = [wf.add(f"p{i}", "ok", queue=Q) for i in range(50)]
    wf.add("sum", "ok", queue=Q, after=parents)
    info = client.start_workflow(wf)
    gates = conn.execute(
        "SELECT count(*), sum(pending) FROM queue_engine.job_gates g"
        " JOIN queue_engine.jobs j ON j.id = g.child_id WHERE j.workflow_id = %s",
        (info.id,),
    ).fetchone()
    assert gates == (16, 50)
    drain(client, queue=Q, tasks=registry(ok=ok))
    total = next(n for n in client.workflow_nodes(info.id) if n.node == "sum")
    assert total.status == "succeeded" and len(total.result["parents"]) == 50
    assert client.get_workflow(info.id).counts["succeeded"] == 51


def test_list_workflows_newest_first_with_filters_and_keyset(client: Client) -> None:
    ids = [client.start_workflow(diamond(f"w{i}")).id for i in range(3)]
    listed = client.list_workflows()
    assert [w.id for w in listed] == ids[::-1]
    assert [w.id for w in client.list_workflows(before_id=ids[2], limit=1)] == [ids[1]]
    assert [w.id for w in client.list_workflows(name="w0")] == [ids[0]]
    assert client.list_workflows(state="failed") == []
    with pytest.raises(ValidationError, match="state must be one of"):
        client.list_workflows(state="nope")


def test_no_node_is_ever_stuck(client: Client, conn: Conn) -> None:
    client.start_workflow(diamond())
    drain(client, queue=Q, tasks=registry(ok=ok, boom=boom))
    assert (
        conn.execute("SELECT count(*) FROM queue_engine.stuck_workflow_nodes()").fetchone()[0] == 0
    )


def test_cancel_of_an_ended_workflow_and_retry_of_a_running_one_are_refused(
    client: Client,
) -> None:
    info = client.start_workflow(diamond())
    with pytest.raises(InvalidTransition, match="still running"):
        client.retry_workflow(info.id)
    drain(client, queue=Q, tasks=registry(ok=ok))
    with pytest.raises(InvalidTransition, match="already ended"):
        client.cancel_workflow(info.id)
    assert client.retry_workflow(info.id) == 0  # nothing failed: nothing to re-run
    with pytest.raises(WorkflowNotFound):
        client.cancel_workflow(info.id + 1000)
    with pytest.raises(WorkflowNotFound):
        client.retry_workflow(info.id + 1000)


def test_cancel_asks_running_nodes_to_stop_and_the_workflow_ends_canceled(
    client: Client, conn: Conn
) -> None:
    info = client.start_workflow(diamond())
    fetch = client.workflow_nodes(info.id)[0].job_id
    conn.execute("UPDATE queue_engine.jobs SET status = 'running' WHERE id = %s", (fetch,))
    assert client.cancel_workflow(info.id) == (3, 1)
    assert client.get_workflow(info.id).state == "running"  # fetch still runs
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'canceled', finished_at = now() WHERE id = %s",
        (fetch,),
    )
    final = client.get_workflow(info.id)
    assert final.state == "canceled" and final.cancel_requested
    assert final.counts["canceled"] == 4
