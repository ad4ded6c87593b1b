"""Invariants of workflows, run by real ``queue-claim-worker`` processes.

The contracts (docs/guides/workflows.md, "Invariants"):

(a) No node waits while all its parents have ended: sampled *during* the runs,
    in single statements (one snapshot each: a parent's end and its children's
    release commit together, so no snapshot may show one without the other),
    by ``stuck_workflow_nodes()`` and by this module's own queries, which also
    check that every waiting node's pending count and gates equal a recount of
    its unfinished parents, and that the tallies equal a recount of the jobs.
(b) No node starts before all its parents have ended, and a parent that did
    not succeed is only ever seen behind a ``finished`` edge: checked from what
    the claim itself told the handler (``ctx.parents``), from the order of the
    job events (the child's first claim after every parent's final event) and
    from the clock (the handler's start after every parent's ``finished_at``).
(c) Under SIGKILL of workers mid-DAG, with an orchestrator giving the killed
    workers' jobs back, every workflow still reaches a final state, every node
    ends as the DAG's semantics say, and the tallies equal a recount.
(d) Parents of shared children ending at once neither lose nor double a
    decrement: a 200 -> 1 fan-in (gated) and a 40 -> 5 bipartite (gated) and a
    12 -> 5 bipartite (ungated) on six workers; each child runs exactly once,
    after all its parents, and ends with every counter at zero.
(e) A workflow canceled while nodes run, then retried, ends ``succeeded``;
    nodes that had succeeded do not run again, every re-run node runs once.
    The same on random shapes whose failing nodes fail only once: the retried
    workflow ends as the shape says with those nodes succeeding, and exactly
    the nodes the retry must re-run (failed, canceled, lost, and descendants
    that did not succeed) run again, once, after their parents.

DAGs come from a seeded generator (random fan-out, fan-in over and under the
16-parent gate threshold, random ``succeeded``/``finished`` edges, handlers
that succeed, fail or skip as their args say), so the expected end of every
node is computed from the shape before the run and compared after it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
import support.workers
from support.orchestrators import spawn as spawn_orchestrator
from support.workers import idle_workers, kill_all, wait_until

from queue_engine import After, Client, Workflow
from queue_engine.testing.databases import TestServer

Conn = psycopg.Connection[Any]
QUEUES = ("wfa", "wfb")
FINAL = ("succeeded", "failed", "canceled", "lost", "skipped")
#: Workers idle between jobs wait for a NOTIFY; the safety poll is the default's.
WORKER_ENV = {"QUEUE_ENGINE_POLL_S": "1", "QUEUE_ENGINE_HEARTBEAT_S": "0.5"}


# --------------------------------------------------------------------------- shapes


@dataclass
class Shape:
    """A workflow's nodes in order, each with its parents (name, requires) and fate."""

    name: str
    parents: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    fates: dict[str, str] = field(default_factory=dict)

    def add(self, node: str, fate: str = "ok", after: list[tuple[str, str]] | None = None) -> None:
        self.parents[node] = after or []
        self.fates[node] = fate

    def build(
        self, log: Path, rng: random.Random | None, fail_as: str = "fail", **args: Any
    ) -> Workflow:
        """The workflow of this shape; ``fail_as`` is the handler's fate for a failing node."""
        wf = Workflow(self.name)
        fates = {"ok": "ok", "skip": "skip", "fail": fail_as}
        for i, (node, after) in enumerate(self.parents.items()):
            # Random queues, or alternating ones: either way both queues' workers take part.
            queue = rng.choice(QUEUES) if rng else QUEUES[i % 2]
            wf.add(
                node,
                "wf.node",
                queue=queue,
                max_attempts=100,
                args={"log": str(log), "fate": fates.get(self.fates[node], "ok"), **args},
                after=[After(p, r) for p, r in after],  # type: ignore[arg-type]
            )
        return wf

    def expected(self) -> dict[str, set[str]]:
        """The possible final statuses of each node (a set when parents race).

        A node runs (and ends as its fate says) unless a parent behind a
        ``succeeded`` edge did not succeed; then it is canceled (that parent
        failed, was canceled or lost) or skipped (that parent was skipped),
        whichever such parent ended first: both when they differ.
        """
        out: dict[str, set[str]] = {}
        ran = {"ok": "succeeded", "fail": "failed", "skip": "skipped"}
        for node, after in self.parents.items():
            bad = [p for p, r in after if r == "succeeded" and out[p] != {"succeeded"}]
            if not bad:
                out[node] = {ran[self.fates[node]]}
            else:
                out[node] = {
                    "skipped" if s == "skipped" else "canceled" for p in bad for s in out[p]
                }
        return out

    def runs(self) -> set[str]:
        """The nodes whose handler runs (no parent behind a ``succeeded`` edge failed)."""
        exp = self.expected()
        return {
            n
            for n, after in self.parents.items()
            if all(exp[p] == {"succeeded"} for p, r in after if r == "succeeded")
        }


def random_shape(rng: random.Random, name: str, n: int) -> Shape:
    """A random DAG: roots, chains, small fan-ins, and a few wide (gated) fan-ins."""
    shape = Shape(name)
    names: list[str] = []
    for i in range(n):
        node = f"n{i:03d}"
        if i == 0 or rng.random() < 0.08:
            after: list[tuple[str, str]] = []
        else:
            r = rng.random()
            if r < 0.08 and i >= 20:
                k = rng.randint(17, min(i, 40))  # wider than the gate threshold
                pool = names
            elif r < 0.5 or i < 2:
                k = 1
                pool = names[-12:]
            else:
                k = rng.randint(2, min(i, 6))
                pool = names[-25:] if len(names) >= 25 else names
            k = min(k, len(pool))
            after = [
                (p, "finished" if rng.random() < 0.3 else "succeeded") for p in rng.sample(pool, k)
            ]
        f = rng.random()
        shape.add(node, "fail" if f < 0.05 else "skip" if f < 0.10 else "ok", after)
        names.append(node)
    return shape


# --------------------------------------------------------------------------- processes


#: ``spawn_worker(dsn, queue=..., log_file=...)``: a ``wf_app`` worker (prefetch 1) appending
#: to its log.
spawn_worker = partial(support.workers.spawn_worker, app="wf_app", append=True, **WORKER_ENV)


#: One test process starts the module's fleet of six workers once (pytest-xdist).
pytestmark = pytest.mark.xdist_group("invariant-workflows-fleet")


@dataclass
class Fleet:
    """A database with workers on both queues, shared by the tests that kill nothing."""

    dsn: str
    tmp: Path
    procs: list[subprocess.Popen[bytes]]


@pytest.fixture(scope="module")
def fleet(
    pg_server: TestServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    name = pg_server.clone(template_db)
    dsn = pg_server.dsn_for(name)
    tmp = tmp_path_factory.mktemp("wf-fleet")
    procs = [spawn_worker(dsn, queue=QUEUES[i % 2], log_file=tmp / f"w{i}.log") for i in range(6)]
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            wait_until(
                lambda: idle_workers(conn) == 6, timeout=60, what="six workers registered and idle"
            )
        yield Fleet(dsn, tmp, procs)
    finally:
        kill_all(procs)
        pg_server.drop(name)


# --------------------------------------------------------------------------- checks

#: Waiting nodes none of whose parents is unfinished: should have been released.
OWN_STUCK = """
SELECT c.workflow_id, c.node FROM queue_engine.jobs c
WHERE c.workflow_id = ANY (%(ids)s) AND c.status = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM queue_engine.job_deps d
                  JOIN queue_engine.jobs p ON p.id = d.parent_id
                  WHERE d.child_id = c.id AND p.status IN ('waiting', 'queued', 'running'))
"""
#: Waiting nodes whose pending count is not what their parents say: one per
#: unfinished ungated parent plus one per gate with parents still to end.
BAD_PENDING = """
SELECT c.workflow_id, c.node, c.pending_parents, x.n FROM queue_engine.jobs c
CROSS JOIN LATERAL (
    SELECT (SELECT count(*) FROM queue_engine.job_deps d
            JOIN queue_engine.jobs p ON p.id = d.parent_id
            WHERE d.child_id = c.id AND d.gate IS NULL
              AND p.status IN ('waiting', 'queued', 'running'))
         + (SELECT count(*) FROM queue_engine.job_gates g
            WHERE g.child_id = c.id AND g.pending > 0) AS n) x
WHERE c.workflow_id = ANY (%(ids)s) AND c.status = 'waiting' AND c.pending_parents <> x.n
"""
#: Gates of waiting nodes whose count is not their number of unfinished parents.
BAD_GATES = """
SELECT c.workflow_id, c.node, g.gate, g.pending,
       count(*) FILTER (WHERE p.status IN ('waiting', 'queued', 'running')) AS n
FROM queue_engine.jobs c
JOIN queue_engine.job_gates g ON g.child_id = c.id
JOIN queue_engine.job_deps d ON d.child_id = g.child_id AND d.gate = g.gate
JOIN queue_engine.jobs p ON p.id = d.parent_id
WHERE c.workflow_id = ANY (%(ids)s) AND c.status = 'waiting'
GROUP BY c.workflow_id, c.node, g.gate, g.pending
HAVING g.pending <> count(*) FILTER (WHERE p.status IN ('waiting', 'queued', 'running'))
"""
#: Workflows whose tallies (or running state) differ from a recount of their jobs.
BAD_TALLIES = """
WITH t AS (
    SELECT workflow_id, sum(unfinished)::int AS unfinished, sum(succeeded)::int AS succeeded,
           sum(failed)::int AS failed, sum(canceled)::int AS canceled, sum(lost)::int AS lost,
           sum(skipped)::int AS skipped
    FROM queue_engine.workflow_tallies WHERE workflow_id = ANY (%(ids)s) GROUP BY workflow_id
), r AS (
    SELECT workflow_id,
           count(*) FILTER (WHERE status IN ('waiting', 'queued', 'running'))::int AS unfinished,
           count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
           count(*) FILTER (WHERE status = 'failed')::int AS failed,
           count(*) FILTER (WHERE status = 'canceled')::int AS canceled,
           count(*) FILTER (WHERE status = 'lost')::int AS lost,
           count(*) FILTER (WHERE status = 'skipped')::int AS skipped
    FROM queue_engine.jobs WHERE workflow_id = ANY (%(ids)s) GROUP BY workflow_id
)
SELECT w.id, w.state, w.open_shards, to_jsonb(t) AS tallies, to_jsonb(r) AS recount
FROM queue_engine.workflows w
JOIN t ON t.workflow_id = w.id JOIN r ON r.workflow_id = w.id
WHERE w.id = ANY (%(ids)s)
  AND ((t.unfinished, t.succeeded, t.failed, t.canceled, t.lost, t.skipped)
       IS DISTINCT FROM (r.unfinished, r.succeeded, r.failed, r.canceled, r.lost, r.skipped)
       OR (w.state = 'running') <> (r.unfinished > 0)
       OR (w.finished_at IS NULL) <> (r.unfinished > 0))
"""
#: Nodes whose only child (and its gate) on their row is not what job_deps
#: says (migration 0024): the trigger's common end takes them from the row.
BAD_ONLY_CHILD = """
SELECT p.workflow_id, p.node, p.only_child, p.only_child_gate, x.n FROM queue_engine.jobs p
CROSS JOIN LATERAL (SELECT count(*) AS n, min(d.child_id) AS child, min(d.gate) AS gate
                    FROM queue_engine.job_deps d WHERE d.parent_id = p.id) x
WHERE p.workflow_id = ANY (%(ids)s)
  AND (p.only_child, p.only_child_gate) IS DISTINCT FROM
      (CASE WHEN x.n = 1 THEN x.child END, CASE WHEN x.n = 1 THEN x.gate END)
"""
ENGINE_STUCK = (
    "SELECT workflow_id, node FROM queue_engine.stuck_workflow_nodes()"
    " WHERE workflow_id = ANY (%(ids)s)"
)
CHECKS = {
    "stuck_workflow_nodes()": ENGINE_STUCK,
    "waiting with every parent ended": OWN_STUCK,
    "pending count differs from a recount": BAD_PENDING,
    "gate count differs from a recount": BAD_GATES,
    "tallies or state differ from a recount": BAD_TALLIES,
    "only child differs from the edges": BAD_ONLY_CHILD,
}


def violations(conn: Conn, ids: list[int]) -> dict[str, list[Any]]:
    """Run every consistency check once; each is one statement, one snapshot."""
    found: dict[str, list[Any]] = {}
    for what, query in CHECKS.items():
        rows = conn.execute(query, {"ids": ids}).fetchall()
        if rows:
            found[what] = rows
    return found


def watch(conn: Conn, ids: list[int], *, timeout: float, each: Any = None) -> int:
    """Check the invariants over and over until every workflow has ended; return the rounds.

    ``each`` (if given) is called between rounds (the chaos test kills there).
    """
    deadline = time.monotonic() + timeout
    rounds = 0
    while True:
        found = violations(conn, ids)
        assert not found, f"invariant broken mid-run: {found}"
        rounds += 1
        row = conn.execute(
            "SELECT count(*) FROM queue_engine.workflows WHERE id = ANY (%s) AND state = 'running'",
            (ids,),
        ).fetchone()
        if row is not None and row[0] == 0:
            return rounds
        if time.monotonic() > deadline:
            raise AssertionError(f"workflows {ids} not ended after {timeout} s")
        if each is not None:
            each()
        time.sleep(0.02)


def executions(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line]


def node_rows(conn: Conn, wf_id: int, since_event: int = 0) -> dict[str, dict[str, Any]]:
    """Every node of a workflow: id, status, finished_at (epoch), first claim, last end event.

    Claims are counted from the event after ``since_event`` (a retry's start).
    """
    rows = conn.execute(
        """
        SELECT j.node, j.id, j.status, extract(epoch FROM j.finished_at)::float8,
               (SELECT min(e.id) FROM queue_engine.job_events e
                WHERE e.job_id = j.id AND e.kind = 'claimed' AND e.id > %(since)s),
               (SELECT max(e.id) FROM queue_engine.job_events e
                WHERE e.job_id = j.id AND e.to_status = ANY (%(final)s)),
               (SELECT count(*) FROM queue_engine.job_events e
                WHERE e.job_id = j.id AND e.kind = 'claimed' AND e.id > %(since)s),
               j.pending_parents
        FROM queue_engine.jobs j WHERE j.workflow_id = %(wf)s
        """,
        {"wf": wf_id, "final": list(FINAL), "since": since_event},
    ).fetchall()
    return {
        r[0]: {
            "id": r[1],
            "status": r[2],
            "finished_at": r[3],
            "first_claim": r[4],
            "end_event": r[5],
            "claims": r[6],
            "pending": r[7],
        }
        for r in rows
    }


def check_ended_as_the_shape_says(
    conn: Conn,
    shape: Shape,
    wf_id: int,
    runs: list[dict[str, Any]],
    *,
    exactly_once: bool,
    should_run: set[str] | None = None,
    since_event: int = 0,
) -> Counter[str]:
    """(b) and the final part of (a)/(c) for one ended workflow; returns its status counts.

    ``runs``: the executions to check (after ``since_event``, a retry's start,
    whose claims alone count); ``should_run``: the nodes that must be among
    them, by default every node the shape runs.
    """
    nodes = node_rows(conn, wf_id, since_event)
    assert set(nodes) == set(shape.parents)
    expected = shape.expected()
    wrong = {
        n: (row["status"], expected[n])
        for n, row in nodes.items()
        if row["status"] not in expected[n]
    }
    assert not wrong, f"{shape.name}: nodes ended otherwise than the shape says: {wrong}"
    mine = [r for r in runs if r["wf"] == wf_id]
    ran = Counter(r["node"] for r in mine)
    should_run = shape.runs() if should_run is None else should_run
    assert set(ran) == should_run, (
        f"{shape.name}: ran {sorted(set(ran) - should_run)} that should not have, "
        f"never ran {sorted(should_run - set(ran))}"
    )
    if exactly_once:
        twice = {n: k for n, k in ran.items() if k != 1 or nodes[n]["claims"] != 1}
        assert not twice, f"{shape.name}: nodes ran more than once: {twice}"
    for r in mine:
        node = r["node"]
        after = dict(shape.parents[node])
        assert r["n_parents"] == len(after), r
        for parent, status in r["not_ok"].items():
            assert status in FINAL, f"{node} claimed while parent {parent} was {status}"
            assert after[parent] == "finished", (
                f"{node} ran although parent {parent} ended {status} behind a succeeded edge"
            )
        for parent in after:
            p = nodes[parent]
            assert p["finished_at"] is not None and r["t"] > p["finished_at"], (
                f"{node} started at {r['t']} before parent {parent} ended at {p['finished_at']}"
            )
            assert nodes[node]["first_claim"] > p["end_event"], (
                f"{node} claimed (event {nodes[node]['first_claim']}) before parent "
                f"{parent}'s end (event {p['end_event']})"
            )
    return Counter(row["status"] for row in nodes.values())


def final_state(counts: Counter[str]) -> str:
    if counts["failed"] or counts["lost"]:
        return "failed"
    return "canceled" if counts["canceled"] else "succeeded"


def workflow_state(conn: Conn, wf_id: int) -> str:
    row = conn.execute(
        "SELECT state FROM queue_engine.workflows WHERE id = %s", (wf_id,)
    ).fetchone()
    assert row is not None
    return str(row[0])


def check_counters_at_zero(conn: Conn, ids: list[int]) -> None:
    """After the end: no pending count or gate left above zero for a node that ran or queued."""
    row = conn.execute(
        """
        SELECT (SELECT count(*) FROM queue_engine.jobs j
                WHERE j.workflow_id = ANY (%(ids)s) AND j.pending_parents <> 0
                  AND j.status IN ('succeeded', 'failed') AND j.task <> 'queue-engine:input'),
               (SELECT count(*) FROM queue_engine.job_gates g
                JOIN queue_engine.jobs j ON j.id = g.child_id
                WHERE j.workflow_id = ANY (%(ids)s) AND g.pending <> 0
                  AND j.status IN ('succeeded', 'failed')),
               (SELECT count(*) FROM queue_engine.jobs j
                WHERE j.workflow_id = ANY (%(ids)s) AND j.pending_parents < 0),
               (SELECT count(*) FROM queue_engine.job_gates g
                JOIN queue_engine.jobs j ON j.id = g.child_id
                WHERE j.workflow_id = ANY (%(ids)s) AND g.pending < 0)
        """,
        {"ids": ids},
    ).fetchone()
    assert row == (0, 0, 0, 0), f"counters not at zero after the end: {row}"


# --------------------------------------------------------------------------- tests


def test_random_dags_never_wait_on_ended_parents_nor_run_before_them(fleet: Fleet) -> None:
    """(a) and (b): six seeded random DAGs run at once by six workers on two queues."""
    rng = random.Random(11)
    log = fleet.tmp / "random.log"
    shapes = [random_shape(rng, f"random-{i}", rng.randint(40, 90)) for i in range(6)]
    with Client(fleet.dsn) as client, psycopg.connect(fleet.dsn, autocommit=True) as conn:
        ids = [client.start_workflow(s.build(log, rng)).id for s in shapes]
        rounds = watch(conn, ids, timeout=90)
        runs = executions(log)
        totals: Counter[str] = Counter()
        for shape, wf_id in zip(shapes, ids, strict=True):
            counts = check_ended_as_the_shape_says(conn, shape, wf_id, runs, exactly_once=True)
            assert workflow_state(conn, wf_id) == final_state(counts)
            totals += counts
        assert not violations(conn, ids)
        check_counters_at_zero(conn, ids)
    # The seed must exercise every way a node can end, and wide (gated) fan-ins.
    assert all(totals[s] for s in ("succeeded", "failed", "canceled", "skipped")), totals
    assert any(len(a) > 16 for s in shapes for a in s.parents.values())
    print(f"\nrandom DAGs: {sum(totals.values())} nodes {dict(totals)}, {rounds} check rounds")


def same_gate_together(parents: list[str], requires: str) -> list[tuple[str, str]]:
    """An ``after`` list in which parents next to each other share a gate.

    A parent's gate is its position in the child's ``after`` list modulo 16,
    and workers claim parents in node order: listed plainly, the six parents
    running at once would each count on a gate of their own. Placed here, the
    first parents take the positions of gate 0, the next ones those of gate 1,
    and so on, so the parents that end together decrement the same gate row.
    """
    positions = sorted(range(len(parents)), key=lambda pos: (pos % 16, pos))
    slots: list[tuple[str, str]] = [("", "")] * len(parents)
    for parent, pos in zip(parents, positions, strict=True):
        slots[pos] = (parent, requires)
    return slots


def test_concurrent_parents_neither_lose_nor_double_a_decrement(fleet: Fleet) -> None:
    """(d): 200 -> 1 and 40 -> 5 (gated), 12 -> 5 (ungated), parents ending together.

    Six workers end parents of the same children (and, in the gated ones, of
    the same gate) at once; a lost decrement leaves a child waiting (caught
    mid-run by the stuck checks), a doubled one starts it early (caught by the
    order checks) or drives a counter below zero.
    """
    log = fleet.tmp / "fanin.log"
    fan_in = Shape("fan-in-200")
    for i in range(200):
        fan_in.add(f"p{i:03d}")
    fan_in.add("join", after=same_gate_together([f"p{i:03d}" for i in range(200)], "succeeded"))
    shapes = [fan_in]
    for width in (40, 12):
        bip = Shape(f"bipartite-{width}x5")
        for i in range(width):
            bip.add(f"p{i:02d}")
        for c in range(5):
            # Half the children take every edge as 'finished': both kinds of edge race.
            req = "finished" if c % 2 else "succeeded"
            bip.add(f"c{c}", after=same_gate_together([f"p{i:02d}" for i in range(width)], req))
        shapes.append(bip)
    with Client(fleet.dsn) as client, psycopg.connect(fleet.dsn, autocommit=True) as conn:
        # Every parent lasts a little, so six workers end them in near lockstep.
        ids = [client.start_workflow(s.build(log, None, sleep=0.005)).id for s in shapes]
        watch(conn, ids, timeout=90)
        runs = executions(log)
        for shape, wf_id in zip(shapes, ids, strict=True):
            counts = check_ended_as_the_shape_says(conn, shape, wf_id, runs, exactly_once=True)
            assert counts == Counter({"succeeded": len(shape.parents)}), counts
            assert workflow_state(conn, wf_id) == "succeeded"
        check_counters_at_zero(conn, ids)
        # Made ready once each: queued by the trigger ('ready') or handed over
        # by its last parent's finish ('claimed' straight from 'waiting').
        ready = conn.execute(
            "SELECT count(*), count(DISTINCT e.job_id) FROM queue_engine.job_events e"
            " JOIN queue_engine.jobs j ON j.id = e.job_id WHERE j.workflow_id = ANY (%s)"
            " AND (e.kind = 'ready' OR (e.kind = 'claimed' AND e.from_status = 'waiting'))",
            (ids,),
        ).fetchone()
        assert ready == (11, 11), f"each child made ready once: {ready}"
        gates = conn.execute(
            "SELECT count(*) FROM queue_engine.job_gates g JOIN queue_engine.jobs j"
            " ON j.id = g.child_id WHERE j.workflow_id = ANY (%s)",
            (ids,),
        ).fetchone()
        assert gates == (16 + 5 * 16,), f"the wide fan-ins count through gates: {gates}"
        pids = {r["pid"] for r in runs if r["wf"] == ids[0]}
    assert len(pids) > 1, "the fan-in's parents ran on one worker only: nothing raced"


def test_a_canceled_then_retried_workflow_succeeds_running_each_node_once_more(
    fleet: Fleet,
) -> None:
    """(e): cancel while middle nodes run, retry, end succeeded; succeeded nodes not re-run."""
    log = fleet.tmp / "cancel.log"
    shape = Shape("cancel-retry")
    shape.add("root")
    for i in range(8):
        shape.add(f"mid{i}", after=[("root", "succeeded")])
    shape.add("join", after=[(f"mid{i}", "succeeded") for i in range(8)])
    shape.add("report", after=[("join", "finished")])
    shape.add("tail", after=[("report", "succeeded")])
    wf = Workflow("cancel-retry")
    for node, after in shape.parents.items():
        wf.add(
            node,
            "wf.node",
            queue=QUEUES[0],
            max_attempts=100,
            # The middle nodes run for a while, checking for a cancel: some are
            # running when it comes, some are still queued.
            args={"log": str(log), "slow": 0.8 if node.startswith("mid") else 0},
            after=[After(p, r) for p, r in after],  # type: ignore[arg-type]
        )
    with Client(fleet.dsn) as client, psycopg.connect(fleet.dsn, autocommit=True) as conn:
        wf_id = client.start_workflow(wf).id
        wait_until(
            lambda: sum(n.status == "running" for n in client.workflow_nodes(wf_id)) >= 2,
            what="middle nodes running",
        )
        canceled, stopping = client.cancel_workflow(wf_id)
        assert stopping >= 2 and canceled >= 3, (canceled, stopping)
        watch(conn, [wf_id], timeout=30)
        before = {n.node: n.status for n in client.workflow_nodes(wf_id)}
        assert workflow_state(conn, wf_id) == "canceled", before
        assert before["root"] == "succeeded" and before["tail"] == "canceled", before
        # A canceled running node ends canceled: its join is canceled, and the
        # report behind a 'finished' edge was canceled by the workflow's cancel.
        assert before["report"] == "canceled" and before["join"] == "canceled", before
        retried_at = time.time()
        rerun = client.retry_workflow(wf_id)
        assert rerun == sum(s != "succeeded" for s in before.values())
        watch(conn, [wf_id], timeout=60)
        after = {n.node: n.status for n in client.workflow_nodes(wf_id)}
        assert workflow_state(conn, wf_id) == "succeeded", after
        assert set(after.values()) == {"succeeded"}, after
        assert not violations(conn, [wf_id])
        check_counters_at_zero(conn, [wf_id])
        again = Counter(r["node"] for r in executions(log) if r["t"] > retried_at)
        for node, status in before.items():
            expected = 0 if status == "succeeded" else 1
            assert again[node] == expected, (node, status, again)
        nodes = node_rows(conn, wf_id)
        for node, after_parents in shape.parents.items():
            for parent, _ in after_parents:
                assert nodes[node]["end_event"] > nodes[parent]["end_event"]


def test_sigkilled_workers_mid_dag_every_workflow_still_ends(dsn: str, tmp_path: Path) -> None:
    """(c): kill -9 random workers over and over while four DAGs run; restart them."""
    rng = random.Random(13)
    log = tmp_path / "chaos.log"
    shapes = [random_shape(rng, f"chaos-{i}", rng.randint(40, 70)) for i in range(4)]
    procs: list[subprocess.Popen[bytes]] = []
    workers: list[tuple[str, subprocess.Popen[bytes]]] = []
    kills = 0
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            orch = spawn_orchestrator(dsn, tmp_path / "orchestrator.log")
            procs.append(orch)
            for i in range(4):
                queue = QUEUES[i % 2]
                w = spawn_worker(dsn, queue=queue, log_file=tmp_path / f"w{i}.log")
                workers.append((queue, w))
                procs.append(w)
            wait_until(lambda: idle_workers(conn) == 4, timeout=60, what="four workers idle")
            with Client(dsn) as client:
                # Nodes last 50-150 ms, so a kill usually lands inside a handler.
                ids = [
                    client.start_workflow(s.build(log, rng, sleep=rng.choice((0.05, 0.1, 0.15)))).id
                    for s in shapes
                ]
            next_kill = time.monotonic() + 0.3

            def kill_one() -> None:
                nonlocal next_kill, kills
                if time.monotonic() < next_kill or kills >= 12:
                    return
                # A worker in the middle of a node: the kill interrupts a handler.
                busy = {
                    int(r[0])
                    for r in conn.execute(
                        "SELECT w.pid FROM queue_engine.jobs j JOIN queue_engine.workers w"
                        " ON w.id = j.claimed_by WHERE j.status = 'running'"
                        " AND j.workflow_id = ANY (%s)",
                        (ids,),
                    ).fetchall()
                }
                candidates = [i for i, (_, w) in enumerate(workers) if w.pid in busy]
                if not candidates:
                    return
                next_kill = time.monotonic() + rng.uniform(0.2, 0.5)
                index = rng.choice(candidates)
                queue, victim = workers[index]
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
                kills += 1
                fresh = spawn_worker(dsn, queue=queue, log_file=tmp_path / f"w-{kills}.log")
                workers[index] = (queue, fresh)
                procs.append(fresh)

            watch(conn, ids, timeout=120, each=kill_one)
            runs = executions(log)
            recovered = conn.execute(
                "SELECT count(*) FROM queue_engine.job_events e JOIN queue_engine.jobs j"
                " ON j.id = e.job_id WHERE j.workflow_id = ANY (%s) AND e.kind = 'recovered'",
                (ids,),
            ).fetchone()
            for shape, wf_id in zip(shapes, ids, strict=True):
                counts = check_ended_as_the_shape_says(conn, shape, wf_id, runs, exactly_once=False)
                assert workflow_state(conn, wf_id) == final_state(counts)
            assert not violations(conn, ids)
            check_counters_at_zero(conn, ids)
            twice = conn.execute(
                "SELECT count(*) FROM (SELECT e.job_id FROM queue_engine.job_events e"
                " JOIN queue_engine.jobs j ON j.id = e.job_id WHERE j.workflow_id = ANY (%s)"
                " AND e.to_status = ANY (%s) GROUP BY e.job_id HAVING count(*) > 1) t",
                (ids, list(FINAL)),
            ).fetchone()
            assert twice == (0,), "a node ended twice"
    finally:
        kill_all(procs)
    print(
        f"\nchaos: {kills} SIGKILLs, {len(runs)} executions of "
        f"{sum(len(s.parents) for s in shapes)} nodes, recovered {recovered}"
    )
    assert kills > 0 and recovered is not None and recovered[0] > 0, (kills, recovered)


def test_a_failed_random_dag_retried_ends_as_if_its_failures_had_succeeded(fleet: Fleet) -> None:
    """(e) on random shapes: nodes that fail once; retry re-runs exactly what it must.

    First run: the ``fail_once`` nodes fail and the DAG ends as the shape says
    with them failing. Retry: it must end as the shape says with them
    succeeding; no node that succeeded (or ran and skipped) runs again, every
    other node that the second shape runs runs once more, and no re-run node
    starts before its parents (re-run or not) have ended.
    """
    rng = random.Random(17)
    log = fleet.tmp / "retry.log"
    first = [random_shape(rng, f"retry-{i}", rng.randint(40, 80)) for i in range(3)]
    with Client(fleet.dsn) as client, psycopg.connect(fleet.dsn, autocommit=True) as conn:
        ids = []
        for shape in first:
            # A failing node fails on its first run only.
            ids.append(client.start_workflow(shape.build(log, rng, fail_as="fail_once")).id)
        watch(conn, ids, timeout=90)
        runs = executions(log)
        before: dict[int, dict[str, str]] = {}
        for shape, wf_id in zip(first, ids, strict=True):
            counts = check_ended_as_the_shape_says(conn, shape, wf_id, runs, exactly_once=True)
            before[wf_id] = {n: r["status"] for n, r in node_rows(conn, wf_id).items()}
            assert workflow_state(conn, wf_id) == final_state(counts)
        failed = [wf_id for wf_id in ids if workflow_state(conn, wf_id) == "failed"]
        assert len(failed) >= 2, "the seed must make most of these workflows fail"
        row = conn.execute("SELECT max(id) FROM queue_engine.job_events").fetchone()
        since = int(row[0]) if row and row[0] is not None else 0
        retried_at = time.time()
        for wf_id in failed:
            assert client.retry_workflow(wf_id) > 0
        watch(conn, ids, timeout=90)
        again = [r for r in executions(log) if r["t"] > retried_at]
        for shape, wf_id in zip(first, ids, strict=True):
            second = Shape(
                shape.name,
                shape.parents,
                {n: "ok" if f == "fail" else f for n, f in shape.fates.items()},
            )
            # What the retry re-runs: failed, canceled and lost nodes, and their
            # descendants that did not succeed (a skipped one included).
            rerun = {n for n, st in before[wf_id].items() if st in ("failed", "canceled", "lost")}
            grew = True
            while grew:
                grew = False
                for node, after in shape.parents.items():
                    if (
                        node not in rerun
                        and before[wf_id][node] != "succeeded"
                        and any(p in rerun for p, _ in after)
                    ):
                        rerun.add(node)
                        grew = True
            counts = check_ended_as_the_shape_says(
                conn,
                second,
                wf_id,
                again,
                exactly_once=True,
                should_run=second.runs() & rerun,
                since_event=since,
            )
            assert workflow_state(conn, wf_id) == final_state(counts)
        assert not violations(conn, ids)
        check_counters_at_zero(conn, ids)
