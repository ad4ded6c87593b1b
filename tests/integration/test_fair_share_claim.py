"""Fair share across partitions in the claim (issue 36 §2, migration 0032).

A job with a ``partition_key`` gets a turn (``fair_tag``) from the row-rules
trigger when it is inserted, and the claim takes due jobs by (priority, turn,
available_at, id): within a queue and priority level the partitions take
turns, or turns in proportion to their weights (``partition_weights``). These
tests enqueue through the real client and plain SQL and claim with the
worker's own statement (``store.finish_and_claim``) against the suite's
Postgres. Design: docs/internals/flow-control.md, §2.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from support.plans import plan_nodes

from queue_engine import Client
from queue_engine.foundation.sql import compiler
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "fq"
Conn = psycopg.Connection[Any]


def add(conn: Conn, n: int, partition: str | None, priority: int = 100) -> list[int]:
    """``n`` due jobs of ``partition`` in ONE multi-row INSERT (the SQL-level enqueue)."""
    rows = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, priority, max_attempts, partition_key)"
        " SELECT %s, 't', %s, 5, %s FROM generate_series(1, %s) ORDER BY 1 RETURNING id",
        (Q, priority, partition, n),
    ).fetchall()
    return sorted(r[0] for r in rows)


def claim_one(conn: Conn) -> store.ClaimedJob | None:
    claimed = store.finish_and_claim(conn, S, worker_id="w1", queue=Q, claim_limit=1).claimed
    return claimed[0] if claimed else None


def drain(conn: Conn, n: int | None = None) -> list[int]:
    """Claim one job at a time (the worker's one-job statement) until none or ``n``."""
    order: list[int] = []
    while n is None or len(order) < n:
        job = claim_one(conn)
        if job is None:
            break
        order.append(job.id)
    return order


def partition_of(conn: Conn, ids: list[int]) -> list[str | None]:
    rows = dict(
        conn.execute(
            "SELECT id, partition_key FROM queue_engine.jobs WHERE id = ANY(%s)", (ids,)
        ).fetchall()
    )
    return [rows[i] for i in ids]


def test_partitions_with_different_backlogs_take_turns(conn: Conn) -> None:
    a = add(conn, 6, "a")
    b = add(conn, 3, "b")
    c = add(conn, 1, "c")
    order = drain(conn)
    # Round-robin from the first claim: each partition that has a job left
    # gets one turn per round; a's backlog does not hold b and c back.
    assert order == [a[0], b[0], c[0], a[1], b[1], a[2], b[2], a[3], a[4], a[5]]


def test_a_weight_of_2_gets_two_claims_for_one(conn: Conn) -> None:
    conn.execute(
        "INSERT INTO queue_engine.partition_weights (queue, partition_key, weight)"
        " VALUES (%s, 'gold', 2)",
        (Q,),
    )
    add(conn, 20, "gold")
    add(conn, 20, "basic")
    parts = partition_of(conn, drain(conn, 15))
    assert parts.count("gold") == 10 and parts.count("basic") == 5
    # Steady 2:1 over every window of three claims (after the first turn).
    assert parts[:3] == ["gold", "basic", "gold"]
    for start in range(1, 13, 3):
        assert sorted(parts[start : start + 3]) == ["basic", "gold", "gold"], parts


def test_plain_jobs_keep_fifo_and_go_first_in_their_priority(conn: Conn) -> None:
    tenant = add(conn, 3, "t1")
    plain = [add(conn, 1, None)[0] for _ in range(3)]
    urgent = add(conn, 1, "t2", priority=1)
    tags = conn.execute(
        "SELECT count(*) FILTER (WHERE fair_tag IS NULL) FROM queue_engine.jobs WHERE id = ANY(%s)",
        (plain,),
    ).fetchone()
    assert tags == (3,)
    # Priority first; within priority 100 the plain jobs, oldest first, then the tenant's.
    assert drain(conn) == urgent + plain + tenant


def test_a_bulk_enqueue_of_one_partition_interleaves_with_another(
    client: Client, conn: Conn
) -> None:
    noisy = client.enqueue_many(
        [{"task": "t", "queue": Q, "partition_key": "noisy"} for _ in range(50)]
    )
    small = client.enqueue_many(
        [{"task": "t", "queue": Q, "partition_key": "small"} for _ in range(3)]
    )
    # One statement each: the trigger saw the rows of its own statement
    # inserted before each one, so a bulk's tags are one turn apart.
    tags = [
        r[0]
        for r in conn.execute(
            "SELECT fair_tag FROM queue_engine.jobs WHERE id = ANY(%s) ORDER BY id", (noisy,)
        ).fetchall()
    ]
    assert tags == [float(i) for i in range(50)]
    order = drain(conn, 6)
    assert order == [noisy[0], small[0], noisy[1], small[1], noisy[2], small[2]]


def test_retried_and_snoozed_partitioned_jobs_are_claimed_again(conn: Conn) -> None:
    first, second = add(conn, 2, "p")
    job = claim_one(conn)
    assert job is not None and job.id == first
    retry = oc.Outcome(job.id, job.attempt, "queued", "retry_scheduled", delay_s=0.0)
    store.finish_only(conn, S, worker_id="w1", queue=Q, outcomes=[retry])
    # It keeps its turn (the trigger does not run on a status change): first again.
    again = claim_one(conn)
    assert again is not None and (again.id, again.attempt) == (first, 2)
    snooze = oc.Outcome(again.id, again.attempt, "queued", "snoozed", delay_s=0.0, refund=1)
    store.finish_only(conn, S, worker_id="w1", queue=Q, outcomes=[snooze])
    assert [j for j in drain(conn)] == [first, second]
    row = conn.execute(
        "SELECT status, attempt FROM queue_engine.jobs WHERE id = %s", (first,)
    ).fetchone()
    assert row == ("running", 2)


@pytest.mark.parametrize(
    ("column", "value", "constraint"),
    [
        ("concurrency_key", "", "jobs_concurrency_key_check"),
        ("concurrency_key", "k" * 256, "jobs_concurrency_key_check"),
        ("concurrency_limit", 0, "jobs_concurrency_limit_check"),
        ("concurrency_limit", 10_001, "jobs_concurrency_limit_check"),
    ],
)
def test_the_row_rules_check_the_concurrency_columns(
    conn: Conn, column: str, value: object, constraint: str
) -> None:
    with pytest.raises(psycopg.errors.CheckViolation) as insert:
        conn.execute(
            f"INSERT INTO queue_engine.jobs (queue, task, {column}) VALUES ('q', 't', %s)",
            (value,),
        )
    assert insert.value.diag.constraint_name == constraint
    ok = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, concurrency_key, concurrency_limit)"
        " VALUES ('q', 't', 'k', 3) RETURNING id"
    ).fetchone()
    assert ok is not None
    with pytest.raises(psycopg.errors.CheckViolation) as update:
        conn.execute(f"UPDATE queue_engine.jobs SET {column} = %s WHERE id = %s", (value, ok[0]))
    assert update.value.diag.constraint_name == constraint


@pytest.mark.parametrize("claim_limit", [1, 10], ids=["one-job", "batch"])
@pytest.mark.parametrize("partition", [None, "tenant"], ids=["plain", "partitioned"])
def test_the_generic_claim_plan_walks_the_index_in_order(
    dsn: str, claim_limit: int, partition: str | None
) -> None:
    """The worker's prepared (generic) claim reads the due jobs in the order of
    jobs_claimable_idx: an index scan under the LIMIT, no sort of the backlog."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        store.configure_session(conn, synchronous_commit="on")
        add(conn, 2000, partition)
        conn.execute("ANALYZE queue_engine.jobs")
        for _ in range(6):  # prepared after a few runs, as the worker's are
            got = store.finish_and_claim(
                conn, S, worker_id="w1", queue=Q, claim_limit=claim_limit
            ).claimed
            assert len(got) == claim_limit
        variant = store.worker_tags(0, claim_limit)
        text = compiler.raw_statement("finish_and_claim_jobs", S, variant)
        found = conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement = %s", [text.text]
        ).fetchone()
        assert found is not None
        params = store.statement_params(
            S,
            worker_id="w1",
            queue=Q,
            outcomes=[],
            claim_limit=claim_limit,
            lease_ttl_s=60,
            gate=store.ClaimGate(host="h"),
        )
        values = [params[name] for name in text.names]
        marks = ", ".join(["%s"] * len(values))
        row = (
            psycopg.ClientCursor(conn)
            .execute(f"EXPLAIN (FORMAT JSON) EXECUTE {found[0]}({marks})", values)
            .fetchone()
        )
        assert row is not None
    nodes = list(plan_nodes(row[0][0]["Plan"]))
    candidate = next(n for n in nodes if n.get("Subplan Name") == "CTE candidate")
    under = list(plan_nodes(candidate))
    assert not [n for n in under if n["Node Type"] in ("Sort", "Incremental Sort")], candidate
    scans = [n for n in under if n.get("Relation Name") == "jobs" and "Index Name" in n]
    assert scans[0]["Index Name"] == "jobs_claimable_idx", candidate
