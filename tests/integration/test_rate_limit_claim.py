"""Per-key rate limits in the claim statement (migration 0033), from several sessions.

A job whose ``concurrency_key`` has a token bucket (``rate_buckets``) is
claimed only while the bucket holds its ``weight`` (``concurrency_free``), and
the status guard (``rate_buckets_spend``) takes those tokens once per job actually
claimed. The tests set a bucket's tokens and ``refilled_at`` directly instead
of sleeping: a bucket's rate here is slow (a token per 1,000 s) so that the
seconds a test takes add no token, and "time passing" is ``refilled_at`` set
back. Design: docs/internals/flow-control.md, §3.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from queue_engine import Client, task
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.followups import FollowUpBuffer
from queue_engine.worker import outcomes as oc
from queue_engine.worker import store

S = "queue_engine"
Q = "rq"
SLOW = 0.001  # tokens a second: nothing refills during a test
Conn = psycopg.Connection[Any]


def add_jobs(
    conn: Conn, n: int, key: str | None, *, weight: int | None = None, priority: int = 100
) -> list[int]:
    """Insert ``n`` due jobs of ``key`` (the SQL-level enqueue)."""
    rows = conn.execute(
        "INSERT INTO queue_engine.jobs (queue, task, priority, concurrency_key, weight)"
        " SELECT %s, 't', %s, %s, %s FROM generate_series(1, %s) RETURNING id",
        (Q, priority, key, weight, n),
    ).fetchall()
    return [r[0] for r in rows]


def bucket(
    conn: Conn, key: str, *, tokens: float, rate: float = SLOW, burst: int = 10, ago_s: float = 0
) -> None:
    """Give ``key`` a bucket holding ``tokens`` as of ``ago_s`` seconds ago."""
    conn.execute(
        "INSERT INTO queue_engine.rate_buckets (key, rate, burst, tokens, refilled_at)"
        " VALUES (%s, %s, %s, %s, clock_timestamp() - make_interval(secs => %s))"
        " ON CONFLICT (key) DO UPDATE SET rate = EXCLUDED.rate, burst = EXCLUDED.burst,"
        " tokens = EXCLUDED.tokens, refilled_at = EXCLUDED.refilled_at",
        (key, rate, burst, tokens, ago_s),
    )


def tokens(conn: Conn, key: str) -> float:
    row = conn.execute(
        "SELECT tokens FROM queue_engine.rate_buckets WHERE key = %s", (key,)
    ).fetchone()
    assert row is not None
    return float(row[0])


def claim(conn: Conn, limit: int = 1, worker_id: str = "w1") -> list[store.ClaimedJob]:
    return store.finish_and_claim(conn, S, worker_id=worker_id, queue=Q, claim_limit=limit).claimed


def drain(conn: Conn, limit: int = 1) -> list[store.ClaimedJob]:
    """Claim until a claim takes nothing."""
    taken: list[store.ClaimedJob] = []
    while batch := claim(conn, limit):
        taken.extend(batch)
    return taken


@pytest.mark.parametrize("batch", [1, 5])
def test_a_bucket_lets_as_many_jobs_start_as_it_holds_tokens(conn: Conn, batch: int) -> None:
    bucket(conn, "api", tokens=3)
    add_jobs(conn, 8, "api")
    assert len(drain(conn, batch)) == 3
    assert tokens(conn, "api") == pytest.approx(0, abs=0.01)
    # A token later (refilled_at set back by 1 / rate seconds): exactly one more.
    conn.execute(
        "UPDATE queue_engine.rate_buckets SET refilled_at = refilled_at - interval '1000 s'"
    )
    assert len(drain(conn, batch)) == 1


def test_the_refill_is_capped_at_the_burst(conn: Conn) -> None:
    # A day idle at one token a second: the bucket holds its burst, not 86,400.
    bucket(conn, "api", tokens=0, rate=1.0, burst=4, ago_s=86_400)
    add_jobs(conn, 10, "api")
    assert len(drain(conn, 10)) == 4


def test_a_weighted_job_takes_its_weight_in_tokens(conn: Conn) -> None:
    bucket(conn, "api", tokens=5)
    add_jobs(conn, 3, "api", weight=2)
    assert len(drain(conn)) == 2  # 5 -> 3 -> 1: the third needs 2
    assert tokens(conn, "api") == pytest.approx(1, abs=0.01)


def test_a_job_heavier_than_the_burst_starts_from_a_full_bucket(conn: Conn) -> None:
    # Never fits, so it would wait for ever: it starts when the bucket is full
    # and leaves the bucket in debt, which the refill repays.
    bucket(conn, "api", tokens=3, burst=3)
    add_jobs(conn, 1, "api", weight=7)
    assert len(drain(conn)) == 1
    assert tokens(conn, "api") == pytest.approx(-4, abs=0.01)
    add_jobs(conn, 1, "api")
    assert drain(conn) == []


def test_a_job_over_the_rate_stays_queued_untouched(conn: Conn) -> None:
    bucket(conn, "api", tokens=0.5)
    (job,) = add_jobs(conn, 1, "api")
    for _ in range(5):
        assert claim(conn) == []
    row = conn.execute(
        "SELECT status, attempt, claimed_by, error FROM queue_engine.jobs WHERE id = %s", (job,)
    ).fetchone()
    assert row == ("queued", 0, None, None)
    kinds = conn.execute(
        "SELECT kind FROM queue_engine.job_events WHERE job_id = %s", (job,)
    ).fetchall()
    assert kinds == []  # no claim, no failure, no event churn (a raw insert writes none)
    # Its token comes due: it runs, on its first attempt.
    conn.execute(
        "UPDATE queue_engine.rate_buckets SET refilled_at = refilled_at - interval '500 s'"
    )
    (claimed,) = claim(conn)
    assert (claimed.id, claimed.attempt) == (job, 1)


@pytest.mark.parametrize("batch", [1, 4])
def test_a_rated_key_never_blocks_other_keys_or_plain_jobs(conn: Conn, batch: int) -> None:
    bucket(conn, "empty", tokens=0)
    add_jobs(conn, 20, "empty", priority=0)  # ahead of everything else
    plain = add_jobs(conn, 2, None)
    keyed = add_jobs(conn, 2, "other")
    taken = {j.id for j in drain(conn, batch)}
    assert taken == set(plain) | set(keyed)


def test_the_concurrency_limit_and_the_rate_of_one_key_both_hold(conn: Conn) -> None:
    bucket(conn, "api", tokens=10)
    conn.execute("INSERT INTO queue_engine.concurrency_limits (key, max_running) VALUES ('api', 2)")
    add_jobs(conn, 5, "api")
    assert len(drain(conn, 5)) == 2  # the limit, not the tokens
    assert tokens(conn, "api") == pytest.approx(8, abs=0.01)


def test_a_skipped_claim_says_when_the_token_is_due(conn: Conn) -> None:
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    bucket(conn, "api", tokens=0.25, rate=0.5)
    add_jobs(conn, 1, "api")
    assert claim(conn) == []
    due = [float(n.rsplit(" ", 1)[1]) for n in notices if n.startswith("queue-engine rate due")]
    # 0.75 tokens at 0.5 a second: 1.5 s (less the few ms the test took).
    assert due and 1.4 < due[0] <= 1.5, notices
    # A plain claim raises nothing.
    notices.clear()
    conn.execute("DELETE FROM queue_engine.jobs")
    add_jobs(conn, 1, None)
    assert len(claim(conn)) == 1 and notices == []


def test_many_sessions_claiming_at_once_take_exactly_the_tokens(dsn: str, conn: Conn) -> None:
    """Eight sessions race for one key's 12 tokens, one-at-a-time and in batches."""
    bucket(conn, "hot", tokens=12, burst=12)
    add_jobs(conn, 200, "hot")
    taken: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def session(n: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            start.wait()
            for _ in range(30):
                got = store.finish_and_claim(
                    c, S, worker_id=f"w{n}", queue=Q, claim_limit=1 + n % 3
                ).claimed
                with lock:
                    taken.extend(j.id for j in got)

    threads = [threading.Thread(target=session, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(taken) == len(set(taken)) == 12
    assert tokens(conn, "hot") == pytest.approx(0, abs=0.01)


def test_the_weight_option_reaches_the_row(client: Client, conn: Conn) -> None:
    job = client.enqueue("t", queue=Q, concurrency_key="api", weight=3)
    many = client.enqueue_many([{"task": "t", "queue": Q, "concurrency_key": "api", "weight": 2}])
    rows = conn.execute(
        "SELECT weight FROM queue_engine.jobs WHERE id = ANY(%s) ORDER BY id",
        ([job.id, *many],),
    ).fetchall()
    assert [r[0] for r in rows] == [3, 2]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"weight": 2}, "weight needs a concurrency_key"),
        ({"concurrency_key": "k", "weight": 0}, "weight"),
        ({"concurrency_key": "k", "weight": 100_001}, "weight"),
        ({"concurrency_key": "k", "weight": "2"}, "weight"),
    ],
)
def test_a_bad_weight_is_refused_before_anything_is_written(
    client: Client, conn: Conn, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        client.enqueue("t", queue=Q, **options)
    assert conn.execute("SELECT count(*) FROM queue_engine.jobs").fetchone() == (0,)


def test_a_tasks_declared_weight_is_taken(client: Client, conn: Conn) -> None:
    @task("rate-test-weighted", queue=Q, concurrency_key="api", weight=4)
    def weighted(args: dict[str, Any]) -> None: ...

    with pytest.raises(ValidationError, match="weight needs a concurrency_key"):
        task("rate-test-bad", weight=2)
    job = client.enqueue("rate-test-weighted")
    row = conn.execute(
        "SELECT concurrency_key, weight FROM queue_engine.jobs WHERE id = %s", (job.id,)
    ).fetchone()
    assert row == ("api", 4)


def test_a_follow_up_keeps_its_weight(conn: Conn) -> None:
    (parent_id,) = add_jobs(conn, 1, None)
    (job,) = claim(conn)
    buffer = FollowUpBuffer(job.id, job.attempt)
    buffer.add("t", {"queue": Q, "concurrency_key": "api", "weight": 5})
    outcome = oc.succeeded(job, None, 1, followups=buffer.encoded())
    store.finish_only(conn, S, worker_id="w1", queue=Q, outcomes=[outcome])
    row = conn.execute(
        "SELECT weight FROM queue_engine.jobs WHERE id <> %s", (parent_id,)
    ).fetchone()
    assert row == (5,)


@pytest.mark.parametrize("batch", [1, 3])
def test_lighter_jobs_never_overtake_a_heavy_one_of_their_key(conn: Conn, batch: int) -> None:
    """A key's jobs start in the queue's order: a heavy job waiting for tokens is not starved."""
    bucket(conn, "api", tokens=2.5)
    (heavy,) = add_jobs(conn, 1, "api", weight=3, priority=0)
    light = add_jobs(conn, 5, "api", priority=10)
    plain = add_jobs(conn, 1, None, priority=20)
    assert [j.id for j in drain(conn, batch)] == plain
    conn.execute(
        "UPDATE queue_engine.rate_buckets SET refilled_at = refilled_at - interval '500 s'"
    )
    taken = [j.id for j in drain(conn, batch)]
    if batch == 1:
        assert taken == [heavy]
        assert tokens(conn, "api") == pytest.approx(0, abs=0.01)
    else:
        # The batch form admits each row by its own weight: the light jobs
        # ranked after the heavy one overdraw the bucket (flow-control.md, §3)
        # and the debt holds the key until the refill repays it.
        assert taken == [heavy, *light[:2]]
        assert tokens(conn, "api") == pytest.approx(-2, abs=0.01)
    assert drain(conn, batch) == []
