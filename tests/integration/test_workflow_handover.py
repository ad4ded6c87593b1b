"""The hand-over: a workflow node's child claimed by the statement that finishes it.

The worker's finish statement, for a workflow node's success, may move a child
whose last pending parent is that node straight from ``waiting`` to
``running`` for the same worker (``finish_and_claim_jobs.sql``, its
``handover`` variant; migration 0009). These tests call the worker's statement
directly (``store.finish_and_claim``) to pin down when it does and when the
child is left to the trigger (``waiting`` -> ``queued``, a ``ready`` event,
a NOTIFY), and run a chain through a real worker loop.
"""

from __future__ import annotations

from typing import Any

import psycopg
from support.workers import running_worker, wait_until

from queue_engine import After, Client, Workflow
from queue_engine.foundation.sql import compiler
from queue_engine.operator.controls import pause_queue
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "hq"
Conn = psycopg.Connection[Any]


def claim(
    conn: Conn, limit: int = 1, outcomes: list[oc.Outcome] | None = None, queue: str = Q
) -> Any:
    return store.finish_and_claim(
        conn, S, worker_id="w1", queue=queue, claim_limit=limit, outcomes=outcomes or []
    )


def nodes(client: Client, workflow_id: int) -> dict[str, Any]:
    return {n.node: n for n in client.workflow_nodes(workflow_id)}


def events(conn: Conn, job_id: int) -> list[tuple[str, str | None, str]]:
    rows = conn.execute(
        f"SELECT kind, from_status, to_status FROM {S}.job_events WHERE job_id = %s ORDER BY id",
        (job_id,),
    ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def chain(name: str = "chain", length: int = 3, queue: str = Q, **kw: Any) -> Workflow:
    wf = Workflow(name)
    previous: list[str] = []
    for i in range(length):
        previous = [wf.add(f"n{i}", "t", queue=queue, after=previous, **kw)]
    return wf


def test_a_success_hands_its_only_child_over_with_the_parents_result(
    client: Client, conn: Conn
) -> None:
    info = client.start_workflow(chain())
    (first,) = claim(conn).claimed
    assert first.node == "n0"
    result = claim(conn, outcomes=[oc.succeeded(first, {"rows": 3}, 5)])
    assert result.finished == {first.id: "succeeded"}
    (second,) = result.claimed
    assert second.node == "n1" and second.attempt == 1 and second.workflow_id == info.id
    # The parent is given as this statement leaves it, not as its snapshot saw it.
    assert second.parents == {"n0": {"status": "succeeded", "result": {"rows": 3}}}
    got = nodes(client, info.id)
    assert (got["n0"].status, got["n1"].status, got["n2"].status) == (
        "succeeded",
        "running",
        "waiting",
    )
    assert got["n1"].pending_parents == 0
    # One event: claimed from waiting, naming the parent; never 'ready' nor 'queued'.
    assert events(conn, second.id) == [("claimed", "waiting", "running")]
    message = conn.execute(
        f"SELECT message FROM {S}.job_events WHERE job_id = %s AND kind = 'claimed'",
        (second.id,),
    ).fetchone()
    assert message == (f"handed over by its last parent, job {first.id}",)
    order = conn.execute(
        f"SELECT job_id, kind FROM {S}.job_events WHERE job_id IN (%s, %s) ORDER BY id",
        (first.id, second.id),
    ).fetchall()
    assert order[-2:] == [(first.id, "succeeded"), (second.id, "claimed")]
    (third,) = claim(conn, outcomes=[oc.succeeded(second, None, 1)]).claimed
    assert third.node == "n2"
    claim(conn, outcomes=[oc.succeeded(third, None, 1)])
    workflow = client.get_workflow(info.id)
    assert workflow.state == "succeeded" and workflow.counts["succeeded"] == 3


def test_a_fan_out_hands_one_child_over_and_queues_the_others(client: Client, conn: Conn) -> None:
    wf = Workflow("fan")
    wf.add("root", "t", queue=Q)
    for i, priority in enumerate((5, 2, 2)):
        wf.add(f"c{i}", "t", queue=Q, after=["root"], priority=priority)
    info = client.start_workflow(wf)
    (root,) = claim(conn).claimed
    with psycopg.connect(conn.info.dsn, autocommit=True) as listener:
        listener.execute(f'LISTEN "{S}.jobs"')
        (handed,) = claim(conn, outcomes=[oc.succeeded(root, None, 1)]).claimed
        woken = [n.payload for n in listener.notifies(timeout=1, stop_after=1)]
    # The best priority, then the lowest id; the rest queued by the trigger, with one NOTIFY.
    assert handed.node == "c1"
    got = nodes(client, info.id)
    assert {n: got[n].status for n in ("c0", "c1", "c2")} == {
        "c0": "queued",
        "c1": "running",
        "c2": "queued",
    }
    assert woken == [Q]
    assert events(conn, got["c2"].job_id) == [("ready", "waiting", "queued")]


def test_a_child_with_another_parent_running_waits_for_it(client: Client, conn: Conn) -> None:
    wf = Workflow("two-parents")
    wf.add("a", "t", queue=Q)
    wf.add("b", "t", queue=Q)
    wf.add("join", "t", queue=Q, after=["a", "b"])
    info = client.start_workflow(wf)
    a, b = claim(conn, limit=2).claimed
    assert claim(conn, outcomes=[oc.succeeded(a, 1, 1)]).claimed == []
    assert nodes(client, info.id)["join"].status == "waiting"
    (join,) = claim(conn, outcomes=[oc.succeeded(b, 2, 1)]).claimed
    assert join.node == "join"
    assert join.parents == {
        "a": {"status": "succeeded", "result": 1},
        "b": {"status": "succeeded", "result": 2},
    }


def test_the_last_parent_of_a_gated_fan_in_hands_the_child_over(client: Client, conn: Conn) -> None:
    wf = Workflow("gated")
    parts = [wf.add(f"p{i:02d}", "t", queue=Q) for i in range(20)]
    wf.add("join", "t", queue=Q, after=parts)
    info = client.start_workflow(wf)
    gates = conn.execute(
        f"SELECT count(*) FROM {S}.job_gates g JOIN {S}.jobs j ON j.id = g.child_id"
        " WHERE j.workflow_id = %s",
        (info.id,),
    ).fetchone()
    assert gates == (16,)
    jobs = claim(conn, limit=20).claimed
    for job in jobs[:-1]:
        assert claim(conn, limit=0, outcomes=[oc.succeeded(job, job.node, 1)]).claimed == []
        assert nodes(client, info.id)["join"].status == "waiting"
    (join,) = claim(conn, outcomes=[oc.succeeded(jobs[-1], "last", 1)]).claimed
    assert join.node == "join" and len(join.parents) == 20
    assert join.parents[jobs[-1].node] == {"status": "succeeded", "result": "last"}
    assert events(conn, join.id) == [("claimed", "waiting", "running")]
    left = conn.execute(
        f"SELECT sum(pending) FROM {S}.job_gates WHERE child_id = %s", (join.id,)
    ).fetchone()
    assert left == (0,)


def test_no_hand_over_where_the_claim_could_not_take_the_child(client: Client, conn: Conn) -> None:
    """Each case leaves the child to the trigger: queued, with its 'ready' event."""
    wf = Workflow("elsewhere")
    wf.add("root", "t", queue=Q)
    wf.add("other_queue", "t", queue="hq.other", after=["root"])
    wf.add("keyed", "t", queue=Q, lock_key="k1", after=["root"])
    wf.add("later", "t", queue=Q, delay=3600, after=["root"])
    wf.input("approval", after=["root"], queue=Q)
    wf.add("worse", "t", queue=Q, priority=9, after=["root"])
    info = client.start_workflow(wf)
    (root,) = claim(conn).claimed
    better = client.enqueue("plain", queue=Q, priority=1).id
    # A plain job of better priority is due: the claim takes it, not the child.
    (taken,) = claim(conn, outcomes=[oc.succeeded(root, None, 1)]).claimed
    assert taken.id == better
    got = nodes(client, info.id)
    assert {n: got[n].status for n in got if n != "root"} == {
        "other_queue": "queued",
        "keyed": "queued",
        "later": "queued",
        "approval": "waiting",
        "worse": "queued",
    }
    assert all(
        ("ready", "waiting", "queued") in events(conn, got[n].job_id) for n in ("keyed", "worse")
    )


def test_no_hand_over_for_a_failure_a_paused_queue_or_a_finish_without_claim(
    client: Client, conn: Conn
) -> None:
    failing = client.start_workflow(chain("failing", max_attempts=1))
    (first,) = claim(conn).claimed
    assert claim(conn, outcomes=[oc.from_exception(first, RuntimeError("no"), 1)]).claimed == []
    assert {n.status for n in client.workflow_nodes(failing.id)} == {"failed", "canceled"}

    paused = client.start_workflow(chain("paused", queue="hq.paused"))
    (first,) = claim(conn, queue="hq.paused").claimed
    pause_queue(conn, S, "hq.paused")
    assert claim(conn, outcomes=[oc.succeeded(first, None, 1)], queue="hq.paused").claimed == []
    assert nodes(client, paused.id)["n1"].status == "queued"

    finish_only = client.start_workflow(chain("finish-only", queue="hq.finish"))
    (first,) = claim(conn, queue="hq.finish").claimed
    outcome = oc.succeeded(first, None, 1)
    assert claim(conn, limit=0, outcomes=[outcome], queue="hq.finish").claimed == []
    assert nodes(client, finish_only.id)["n1"].status == "queued"


def test_a_warm_worker_with_room_for_one_gets_the_child_only(client: Client, conn: Conn) -> None:
    """A warm job waits for the next claim: the hand-over fills a one-job claim."""
    info = client.start_workflow(chain("warm"))
    (first,) = claim(conn).claimed
    warm = client.enqueue("t", queue=Q, affinity_key="model-a").id
    gate = store.ClaimGate(host="h", warm_key="model-a")

    def finish(job: Any, limit: int) -> Any:
        return store.finish_and_claim(
            conn,
            S,
            worker_id="w1",
            queue=Q,
            claim_limit=limit,
            outcomes=[oc.succeeded(job, None, 1)],
            gate=gate,
        ).claimed

    (second,) = finish(first, 1)
    assert second.node == "n1"
    # With room for two, the warm job comes along with the hand-over.
    got = finish(second, 2)
    assert {j.id for j in got} == {warm, nodes(client, info.id)["n2"].job_id}


def test_a_canceled_child_is_not_handed_over(client: Client, conn: Conn) -> None:
    wf = Workflow("canceled-child")
    wf.add("root", "t", queue=Q)
    wf.add("child", "t", queue=Q, after=[After("root", "finished")])
    info = client.start_workflow(wf)
    (root,) = claim(conn).claimed
    child_id = nodes(client, info.id)["child"].job_id
    conn.execute(
        f"UPDATE {S}.jobs SET status = 'canceled', finished_at = now() WHERE id = %s", (child_id,)
    )
    assert claim(conn, outcomes=[oc.succeeded(root, None, 1)]).claimed == []
    assert nodes(client, info.id)["child"].status == "canceled"


def test_a_real_worker_runs_a_chain_handing_every_node_over(
    dsn: str, client: Client, conn: Conn
) -> None:
    seen: list[tuple[str, Any]] = []

    def step(args: dict[str, Any], ctx: Any) -> Any:
        seen.append((ctx.node, ctx.parent_results))
        return len(seen)

    tasks = TaskRegistry()
    tasks.register(
        TaskDefinition(name="t", handler=step, queue=Q, max_attempts=1, wants_context=True)
    )
    info = client.start_workflow(chain("real", length=20))
    with running_worker(dsn, tasks=tasks, queue=Q):
        wait_until(lambda: client.get_workflow(info.id).state != "running", what="the chain ends")
    assert client.get_workflow(info.id).state == "succeeded"
    assert [node for node, _ in seen] == [f"n{i}" for i in range(20)]
    assert [parents for _, parents in seen][1:] == [{f"n{i}": i + 1} for i in range(19)]
    handed = conn.execute(
        f"SELECT count(*) FROM {S}.job_events e JOIN {S}.jobs j ON j.id = e.job_id"
        " WHERE j.workflow_id = %s AND e.kind = 'claimed' AND e.from_status = 'waiting'",
        (info.id,),
    ).fetchone()
    assert handed == (19,)


def test_a_handed_over_node_is_finished_without_the_claim(client: Client, conn: Conn) -> None:
    """The ``solo`` variant: a handed-over node's finish hands over, and claims nothing else."""
    info = client.start_workflow(chain(length=3))
    other = client.enqueue("t", queue=Q, priority=200)
    (first,) = claim(conn).claimed
    assert first.node == "n0" and not first.handed_over
    (second,) = claim(conn, outcomes=[oc.succeeded(first, None, 1)]).claimed
    assert second.node == "n1" and second.handed_over
    done = oc.succeeded(second, None, 1)
    assert done.handed_over and store.solo_handover([done], 1, None)
    assert not store.solo_handover([done], 2, None)  # a batch claim keeps the claim
    assert not store.solo_handover([done], 1, "warm-key")
    (third,) = claim(conn, outcomes=[done]).claimed
    assert third.node == "n2" and third.handed_over
    # The last node: nothing to hand over, and the solo statement claims nothing,
    # not even the queued job that a claim would take.
    result = claim(conn, outcomes=[oc.succeeded(third, None, 1)])
    assert result.finished == {third.id: "succeeded"} and result.claimed == []
    assert client.get(other.id).status == "queued"
    assert client.get_workflow(info.id).state == "succeeded"


def test_a_worker_claims_at_once_when_a_solo_finish_hands_nothing_over(
    dsn: str, client: Client
) -> None:
    """After the chain's last node the worker claims the queued job without waiting for a poll."""
    tasks = TaskRegistry()
    tasks.register(TaskDefinition(name="t", handler=lambda args: None, queue=Q, max_attempts=1))
    info = client.start_workflow(chain("tail", length=3))
    other = client.enqueue("t", queue=Q, priority=200)
    # Nothing wakes this worker but its own statements: its NOTIFYs came before
    # it listened, and its poll is an hour away.
    with running_worker(dsn, tasks=tasks, queue=Q, poll_s=3600):
        wait_until(lambda: client.get(other.id).status == "succeeded", what="the queued job runs")
    assert client.get_workflow(info.id).state == "succeeded"


def test_a_worker_stops_trying_the_hand_over_on_a_fans_parts(dsn: str, client: Client) -> None:
    """Parts whose join waits for the others: after a few misses the worker sends them plain."""
    tasks = TaskRegistry()
    tasks.register(TaskDefinition(name="t", handler=lambda args: None, queue=Q, max_attempts=1))
    wf = Workflow("fan")
    root = wf.add("root", "t", queue=Q)
    parts = [wf.add(f"p{i}", "t", queue=Q, after=[root]) for i in range(40)]
    wf.add("join", "t", queue=Q, after=parts)
    info = client.start_workflow(wf)
    with running_worker(dsn, tasks=tasks, queue=Q) as worker:
        wait_until(lambda: client.get_workflow(info.id).state != "running", what="the fan ends")
        misses = worker.flusher.handover.misses(info.id, "root")
        sent_without = worker.flusher.handover.sent_without
    assert client.get_workflow(info.id).state == "succeeded"
    # 40 parts, one worker: every part's success missed (the join waited for
    # the others), tried or not; the join, the last node, has no child either.
    assert misses >= 40
    # Three misses in a row, then only one success in 128 tries again: of the
    # parts' 40 successes after the root's hand-over, 3 carried it (the join
    # has other parents: it is tried on its own).
    assert sent_without >= 35


def test_every_combination_of_the_finish_statements_variants_prepares(conn: Conn) -> None:
    """Warm or cold, with or without follow-ups and hand-over (and cold solo): all valid."""
    for claim_tag in ("cold", "warm"):
        solo: tuple[tuple[str, ...], ...] = (
            (("handover", "solo"), ("followups", "handover", "solo")) if claim_tag == "cold" else ()
        )
        for extra in ((), ("followups",), ("handover",), ("followups", "handover"), *solo):
            statement = compiler.raw_statement("finish_and_claim_jobs", S, (claim_tag, *extra))
            name = "_".join(("v", claim_tag, *extra))
            conn.execute(f"PREPARE {name} AS {statement.text}")  # type: ignore[arg-type]
            conn.execute(f"DEALLOCATE {name}")  # type: ignore[arg-type]
