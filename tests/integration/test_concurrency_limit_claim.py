"""Per-key concurrency limits in the claim statement, from several sessions.

The claim (``finish_and_claim_jobs.sql``) takes a job with a
``concurrency_key`` only while ``concurrency_free`` (migration 0031) says its
key has a free slot: the jobs' own limit, or the operator's from
``concurrency_limits``. These tests call the worker's statement directly on
several connections; the fleet-wide invariant with real worker processes and
SIGKILLs is ``tests/test_invariant_concurrency_limit.py``. Design:
docs/internals/flow-control.md.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from support.workers import wait_until

from queue_engine import Client, Workflow, task
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.followups import FollowUpBuffer
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "cq"
Conn = psycopg.Connection[Any]


def add_jobs(
    conn: Conn, n: int, key: str | None, limit: int | None, priority: int = 100
) -> list[int]:
    """Insert ``n`` due jobs of ``key`` (the SQL-level enqueue: a plain INSERT)."""
    rows = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, priority, concurrency_key, concurrency_limit)"
        " SELECT %s, 't', %s, %s, %s FROM generate_series(1, %s) RETURNING id",
        (Q, priority, key, limit, n),
    ).fetchall()
    return [r[0] for r in rows]


def claim(conn: Conn, limit: int = 1, worker_id: str = "w1") -> list[store.ClaimedJob]:
    return store.finish_and_claim(conn, S, worker_id=worker_id, queue=Q, claim_limit=limit).claimed


def running(conn: Conn, key: str) -> int:
    row = conn.execute(
        "SELECT count(*) FROM queue_engine.jobs WHERE concurrency_key = %s AND status = 'running'",
        (key,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_batch_claim_takes_at_most_the_limit_of_a_key(conn: Conn) -> None:
    keyed = add_jobs(conn, 5, "src", 2, priority=1)
    plain = add_jobs(conn, 2, None, None, priority=2)
    first = claim(conn, limit=10)
    # The two best jobs of the key and every plain job: the key's others wait.
    assert sorted(j.id for j in first) == sorted(keyed[:2] + plain)
    assert claim(conn, limit=10, worker_id="w2") == []
    assert running(conn, "src") == 2
    # A finish frees a slot: the next claim takes exactly one more.
    done = next(j for j in first if j.id == keyed[0])
    store.finish_only(conn, S, worker_id="w1", queue=Q, outcomes=[oc.succeeded(done, None, 1)])
    assert [j.id for j in claim(conn, limit=10, worker_id="w2")] == [keyed[2]]
    # Skipped, never failed or retried: the waiting jobs are queued, attempt 0.
    rows = conn.execute(
        "SELECT status, attempt FROM queue_engine.jobs WHERE id = ANY(%s)", (keyed[3:],)
    ).fetchall()
    assert rows == [("queued", 0), ("queued", 0)]


def test_one_job_claims_move_past_a_full_key_to_other_work(conn: Conn) -> None:
    keyed = add_jobs(conn, 3, "api", 1, priority=1)
    other = add_jobs(conn, 1, "db", 1, priority=2)
    plain = add_jobs(conn, 1, None, None, priority=3)
    taken = [claim(conn, worker_id=f"w{i}") for i in range(4)]
    assert [[j.id for j in t] for t in taken] == [[keyed[0]], [other[0]], [plain[0]], []]


def test_an_operators_limit_overrides_the_jobs_own(conn: Conn) -> None:
    add_jobs(conn, 6, "load", 5)
    conn.execute(
        "INSERT INTO queue_engine.concurrency_limits (key, max_running) VALUES ('load', 1)"
    )
    assert len(claim(conn, limit=10)) == 1
    # Raised at runtime: the next claim takes the new room, no restart, no re-enqueue.
    conn.execute("UPDATE queue_engine.concurrency_limits SET max_running = 3 WHERE key = 'load'")
    assert len(claim(conn, limit=10, worker_id="w2")) == 2
    assert running(conn, "load") == 3
    # Zero holds the key: nothing more starts, the running jobs go on.
    conn.execute("UPDATE queue_engine.concurrency_limits SET max_running = 0 WHERE key = 'load'")
    conn.execute("DELETE FROM queue_engine.jobs WHERE status = 'running'")
    assert claim(conn, limit=10, worker_id="w3") == []
    # Cleared: the jobs' own limit (5) applies again.
    conn.execute("DELETE FROM queue_engine.concurrency_limits WHERE key = 'load'")
    assert len(claim(conn, limit=10, worker_id="w4")) == 3


def test_a_key_without_any_limit_is_not_limited(conn: Conn) -> None:
    add_jobs(conn, 4, "free", None)
    assert len(claim(conn, limit=10)) == 4


def test_a_claim_in_flight_on_another_session_makes_the_key_wait(dsn: str, conn: Conn) -> None:
    """The claims of one key are serialised: while one is uncommitted, another skips the key."""
    add_jobs(conn, 4, "k", 2)
    plain = add_jobs(conn, 1, None, None, priority=200)
    with psycopg.connect(dsn) as open_tx:  # not autocommit: its claim stays open
        assert len(claim(open_tx, worker_id="a")) == 1
        # The other session skips the key (another claim of it is in flight)
        # and moves on to other work; it neither waits nor fails.
        assert [j.id for j in claim(conn, limit=10, worker_id="b")] == plain
        open_tx.commit()
    # Committed: one slot of two is taken; exactly one more may start.
    assert len(claim(conn, limit=10, worker_id="c")) == 1
    assert claim(conn, limit=10, worker_id="d") == []
    assert running(conn, "k") == 2


def test_the_count_sees_a_claim_committed_after_the_statement_began(dsn: str, conn: Conn) -> None:
    """concurrency_free counts with a fresh snapshot, not its statement's.

    A statement whose snapshot predates another session's committed claim of
    the key must still count that claim once it holds the key's lock:
    otherwise two claims that overlap in time could both see a free slot. The
    probe's statement takes its snapshot, then waits on a lock the test holds
    while another session commits a running job of the key.
    """
    conn.execute("SELECT pg_advisory_lock(4242)")
    answer: list[Any] = []

    def probe() -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            row = c.execute(
                "SELECT queue_engine.concurrency_free('k', 1)"
                " FROM (SELECT pg_advisory_lock(4242) OFFSET 0) AS waited"
            ).fetchone()
            answer.append(row[0] if row else None)

    thread = threading.Thread(target=probe)
    thread.start()
    try:
        wait_until(
            lambda: (
                (
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND wait_event = 'advisory'"
                    ).fetchone()
                    or (0,)
                )[0]
                >= 1
            ),
            what="the probe waiting with its snapshot taken",
        )
        conn.execute(
            "INSERT INTO queue_engine.jobs (queue, task, status, attempt, claimed_by,"
            " started_at, lease_expires_at, concurrency_key, concurrency_limit)"
            " VALUES (%s, 't', 'running', 1, 'other', now(), now() + interval '1 minute', 'k', 1)",
            (Q,),
        )
    finally:
        conn.execute("SELECT pg_advisory_unlock(4242)")
        thread.join(30)
    assert answer == [0]


def test_many_sessions_claiming_at_once_never_exceed_the_limit(dsn: str, conn: Conn) -> None:
    """Eight sessions claim and finish one job at a time in a tight loop; a monitor samples."""
    limits = {"a": 1, "b": 2, "c": 3}
    for key, limit in limits.items():
        add_jobs(conn, 40, key, limit)
    add_jobs(conn, 20, None, None)
    seen: dict[str, int] = dict.fromkeys(limits, 0)
    errors: list[BaseException] = []
    stop = threading.Event()

    def session(n: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as c:
                held: list[store.ClaimedJob] = []
                idle = 0
                while idle < 50:
                    outcomes = [oc.succeeded(j, None, 1) for j in held]
                    held = store.finish_and_claim(
                        c, S, worker_id=f"s{n}", queue=Q, outcomes=outcomes, claim_limit=1
                    ).claimed
                    idle = 0 if held else idle + 1
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    def monitor() -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            while not stop.is_set():
                for key, count in c.execute(
                    "SELECT concurrency_key, count(*) FROM queue_engine.jobs"
                    " WHERE status = 'running' AND concurrency_key IS NOT NULL GROUP BY 1"
                ).fetchall():
                    seen[key] = max(seen[key], count)

    watcher = threading.Thread(target=monitor)
    watcher.start()
    threads = [threading.Thread(target=session, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    watcher.join(30)
    assert not errors, errors
    statuses = conn.execute(
        "SELECT status, attempt, count(*) FROM queue_engine.jobs GROUP BY 1, 2"
    ).fetchall()
    assert statuses == [("succeeded", 1, 140)]
    assert all(seen[k] <= limits[k] for k in limits), seen
    # The jobs' claim and finish events: at no instant more than the limit running.
    events = conn.execute(
        "SELECT j.concurrency_key, e.kind, e.id FROM queue_engine.job_events e"
        " JOIN queue_engine.jobs j ON j.id = e.job_id"
        " WHERE j.concurrency_key IS NOT NULL AND e.kind IN ('claimed', 'succeeded')"
        " ORDER BY e.id"
    ).fetchall()
    most = max_overlap(events)
    assert set(most) == set(limits)
    assert all(most[k] <= limits[k] for k in limits), most


def max_overlap(events: list[tuple[Any, ...]]) -> dict[str, int]:
    """The most jobs of each key running at once, from claim and end events in commit order.

    Event ids are drawn in statement order, and the claim of a key's job is
    serialised with every other claim of the key, so the id order of one
    key's events is an order they could have committed in.
    """
    now: dict[str, int] = {}
    most: dict[str, int] = {}
    for key, kind, _id in events:
        now[key] = now.get(key, 0) + (1 if kind == "claimed" else -1)
        most[key] = max(most.get(key, 0), now[key])
    return most


def test_the_enqueue_options_reach_the_row_and_the_claim(client: Client, conn: Conn) -> None:
    """Client.enqueue and enqueue_many write the key and limit; the plain enqueue is untouched."""
    one = client.enqueue("t", queue=Q, concurrency_key="erp", concurrency_limit=2)
    many = client.enqueue_many(
        [{"task": "t", "queue": Q, "concurrency_key": "erp", "concurrency_limit": 2}] * 3
        + [{"task": "t", "queue": Q}]
    )
    plain = client.enqueue("t", queue=Q)
    rows = conn.execute(
        "SELECT id, concurrency_key, concurrency_limit FROM queue_engine.jobs ORDER BY id"
    ).fetchall()
    assert rows == [(one.id, "erp", 2)] + [(i, "erp", 2) for i in many[:3]] + [
        (many[3], None, None),
        (plain.id, None, None),
    ]
    assert sorted(j.id for j in claim(conn, limit=10)) == [one.id, many[0], many[3], plain.id]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency_limit": 2}, "concurrency_limit needs a concurrency_key"),
        ({"concurrency_key": "k", "concurrency_limit": 0}, "between 1 and 10000"),
        ({"concurrency_key": "", "concurrency_limit": 1}, "non-empty string"),
        ({"concurrency_key": "k", "concurrency_limit": True}, "must be an integer"),
    ],
)
def test_bad_options_are_refused_before_anything_is_written(
    client: Client, conn: Conn, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        client.enqueue("t", queue=Q, **options)
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone() == (0,)


def test_workflow_nodes_run_under_their_keys_limit(client: Client, conn: Conn) -> None:
    """start_workflow writes a node's key and limit; parallel nodes of one key take turns."""
    wf = Workflow("w")
    for name in ("a", "b", "c"):
        wf.add(name, "t", queue=Q, concurrency_key="erp", concurrency_limit=1)
    wf.add("d", "t", queue=Q)
    client.start_workflow(wf)
    rows = conn.execute(
        "SELECT node, concurrency_key, concurrency_limit FROM queue_engine.jobs ORDER BY node"
    ).fetchall()
    assert rows == [("a", "erp", 1), ("b", "erp", 1), ("c", "erp", 1), ("d", None, None)]
    first = claim(conn, limit=10)
    assert sorted(j.node or "" for j in first) == ["a", "d"]
    assert claim(conn, limit=10, worker_id="w2") == []


def test_a_follow_up_keeps_its_concurrency_key(conn: Conn) -> None:
    """ctx.enqueue's follow-ups are inserted by the finish: with the key and limit they carry."""
    (parent_id,) = add_jobs(conn, 1, None, None)
    (job,) = claim(conn)
    buffer = FollowUpBuffer(job.id, job.attempt)
    buffer.add("t", {"queue": Q, "concurrency_key": "erp", "concurrency_limit": 3})
    outcome = oc.succeeded(job, None, 1, followups=buffer.encoded())
    store.finish_only(conn, S, worker_id="w1", queue=Q, outcomes=[outcome])
    row = conn.execute(
        "SELECT concurrency_key, concurrency_limit FROM queue_engine.jobs WHERE id <> %s",
        (parent_id,),
    ).fetchone()
    assert row == ("erp", 3)


def test_a_tasks_declared_key_is_taken_by_every_enqueue_that_gives_none(
    client: Client, conn: Conn
) -> None:
    @task("loads.erp", queue=Q, concurrency_key="src:erp", concurrency_limit=2)
    def load(args: dict[str, Any]) -> None: ...

    plain = client.enqueue("loads.erp")  # the plain path: falls back to the full insert
    (bulk,) = client.enqueue_many([{"task": "loads.erp"}])
    own = client.enqueue("loads.erp", concurrency_key="other", concurrency_limit=5)
    rows = dict(
        conn.execute(
            "SELECT id, (concurrency_key, concurrency_limit)::text FROM queue_engine.jobs"
        ).fetchall()
    )
    assert rows == {plain.id: "(src:erp,2)", bulk: "(src:erp,2)", own.id: "(other,5)"}
    wf = Workflow("w")
    wf.add("a", "loads.erp")
    client.start_workflow(wf)
    node = conn.execute(
        "SELECT (concurrency_key, concurrency_limit)::text FROM queue_engine.jobs WHERE node = 'a'"
    ).fetchone()
    assert node == ("(src:erp,2)",)
    with pytest.raises(ValidationError, match="concurrency_limit needs a concurrency_key"):
        task("loads.bad", concurrency_limit=2)


def test_a_claim_walks_past_a_full_keys_backlog_counting_it_once(conn: Conn) -> None:
    """Jobs of a full key ahead of other work: skipped, and the key remembered for the statement.

    The first job of the full key costs the count of its running jobs; the
    transaction then remembers the key (a transaction-local setting), so the
    rest of its backlog costs a lookup each, not a count (head-of-line).
    """
    conn.execute("INSERT INTO queue_engine.concurrency_limits (key, max_running) VALUES ('hot', 1)")
    (running_id,) = add_jobs(conn, 1, "hot", None, priority=1)
    assert [j.id for j in claim(conn)] == [running_id]
    backlog = add_jobs(conn, 200, "hot", None, priority=1)
    (plain,) = add_jobs(conn, 1, None, None, priority=2)
    with conn.transaction():
        assert [j.id for j in claim(conn, worker_id="w2")] == [plain]
        memo = conn.execute(
            "SELECT current_setting('queue_engine_flow.skip_'"
            " || to_hex(hashtext('\"queue_engine\"')), true)"
        ).fetchone()
    assert memo == ("{*hot}",)
    states = conn.execute(
        "SELECT status, attempt, count(*) FROM queue_engine.jobs WHERE id = ANY(%s) GROUP BY 1, 2",
        (backlog,),
    ).fetchall()
    assert states == [("queued", 0, 200)]
    # A job's own limit is remembered with the limit: another limit is looked at again.
    first, *_ = add_jobs(conn, 3, "own", 1, priority=0)
    (wider,) = add_jobs(conn, 1, "own", 2, priority=0)
    with conn.transaction():
        taken = claim(conn, limit=1, worker_id="w3") + claim(conn, limit=1, worker_id="w4")
        memo = conn.execute(
            "SELECT current_setting('queue_engine_flow.skip_'"
            " || to_hex(hashtext('\"queue_engine\"')), true)"
        ).fetchone()
    assert [j.id for j in taken] == [first, wider]
    assert memo == ("{1:own}",)
