"""Client.enqueue_many: one statement, ids in input order, keys resolved, all or nothing.

Contracts: the returned ids map to the input items position by position, on
the plain (no keys) path and on the keyed path, for large shuffled batches;
inside a batch a repeated key resolves to the first item's job; a key held by
an existing job returns that job (dedupe keys only while it is active); one bad
item anywhere refuses the whole batch before anything is written; on a
caller's connection the jobs exist iff the caller commits.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from support.jobs import count_jobs

from queue_engine import Client
from queue_engine.foundation.errors import ValidationError

Conn = psycopg.Connection[Any]


def index_by_id(conn: Conn) -> dict[int, int]:
    rows = conn.execute("SELECT id, (args->>'i')::int FROM queue_engine.jobs").fetchall()
    return {job_id: i for job_id, i in rows}


def test_empty_list_returns_empty_list(client: Client, conn: Conn) -> None:
    assert client.enqueue_many([]) == []
    assert client.enqueue_many(iter([])) == []
    assert count_jobs(conn) == 0


def test_plain_path_returns_ids_in_input_order_for_a_large_batch(
    client: Client, conn: Conn
) -> None:
    rng = random.Random(20240601)
    n = 20_000
    queues = ["q.a", "q.b", "q.c", "load.cbr", "default"]
    items = [
        {
            "task": rng.choice(["etl.load", "etl.clean", "send"]),
            "queue": rng.choice(queues),
            "priority": rng.randint(0, 1000),
            "args": {"i": i},
        }
        for i in range(n)
    ]
    ids = client.enqueue_many(items)
    assert len(ids) == n
    assert len(set(ids)) == n
    by_id = index_by_id(conn)
    assert len(by_id) == n
    assert [by_id[job_id] for job_id in ids] == list(range(n))
    # Every other column went to the right row too.
    rows = conn.execute("SELECT id, queue, priority, task FROM queue_engine.jobs").fetchall()
    stored = {r[0]: r[1:] for r in rows}
    for job_id, item in zip(ids, items, strict=True):
        assert stored[job_id] == (item["queue"], item["priority"], item["task"])


def test_keyed_path_returns_ids_in_input_order(client: Client, conn: Conn) -> None:
    rng = random.Random(7)
    n = 20_000
    items: list[dict[str, Any]] = []
    for i in range(n):
        item: dict[str, Any] = {
            "task": "t",
            "queue": rng.choice(["k1", "k2", "k3"]),
            "priority": rng.randint(0, 1000),
            "args": {"i": i},
        }
        if rng.random() < 0.5:
            item["idempotency_key"] = f"idem-{i}"
        elif rng.random() < 0.5:
            item["dedupe_key"] = f"dedupe-{i}"
        items.append(item)
    ids = client.enqueue_many(items)
    assert len(set(ids)) == n
    by_id = index_by_id(conn)
    assert [by_id[job_id] for job_id in ids] == list(range(n))
    keys = dict(
        conn.execute("SELECT id, coalesce(idempotency_key, dedupe_key) FROM queue_engine.jobs")
    )
    for job_id, item in zip(ids, items, strict=True):
        assert keys[job_id] == item.get("idempotency_key", item.get("dedupe_key"))


def test_every_option_is_stored_per_row(client: Client, conn: Conn) -> None:
    when = datetime(2032, 2, 3, 4, 5, 6, tzinfo=UTC)
    ids = client.enqueue_many(
        [
            {
                "task": "a",
                "queue": "qa",
                "args": {"x": [1, {"y": None}]},
                "priority": 0,
                "run_at": when,
                "max_attempts": 2,
                "timeout_s": 10,
                "lease_ttl_s": 20,
                "lock_key": "L",
                "partition_key": "P",
                "producer": "me",
            },
            {"task": "b"},
            {"task": "c", "delay": 120},
        ]
    )
    now = conn.execute("SELECT now()").fetchone()[0]
    rows = {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT id, task, queue, args, priority, available_at, max_attempts, timeout_s,"
            " lease_ttl_s, lock_key, partition_key, producer, status, attempt"
            " FROM queue_engine.jobs"
        )
    }
    assert rows[ids[0]] == (
        "a",
        "qa",
        {"x": [1, {"y": None}]},
        0,
        when,
        2,
        10,
        20,
        "L",
        "P",
        "me",
        "queued",
        0,
    )
    b = rows[ids[1]]
    assert b[:4] == ("b", "default", {}, 100)
    assert b[4] <= now
    assert b[5:] == (5, None, None, None, None, None, "queued", 0)
    c = rows[ids[2]]
    assert now + timedelta(seconds=110) < c[4] <= now + timedelta(seconds=121)


def test_options_shared_by_every_row_are_stored_on_each(client: Client, conn: Conn) -> None:
    # A column with one value for the whole batch is sent once (not as an
    # array): each row must still get it.
    when = datetime(2032, 2, 3, 4, 5, 6, tzinfo=UTC)
    shared = {
        "task": "a",
        "queue": "qa",
        "args": {"x": 1},
        "priority": 3,
        "run_at": when,
        "max_attempts": 2,
        "timeout_s": 10,
        "lease_ttl_s": 20,
        "lock_key": "L",
        "partition_key": "P",
        "producer": "me",
        "affinity_key": "m",
    }
    ids = client.enqueue_many([dict(shared) for _ in range(3)])
    delayed = client.enqueue_many([{"task": "d", "delay": 120}, {"task": "d", "delay": 120}])
    now = conn.execute("SELECT now()").fetchone()[0]
    rows = conn.execute(
        "SELECT task, queue, args, priority, available_at, max_attempts, timeout_s,"
        " lease_ttl_s, lock_key, partition_key, producer, affinity_key FROM queue_engine.jobs"
        " WHERE id = ANY(%s) ORDER BY id",
        (ids,),
    ).fetchall()
    assert rows == [("a", "qa", {"x": 1}, 3, when, 2, 10, 20, "L", "P", "me", "m")] * 3
    for (available_at,) in conn.execute(
        "SELECT available_at FROM queue_engine.jobs WHERE id = ANY(%s)", (delayed,)
    ):
        assert now + timedelta(seconds=110) < available_at <= now + timedelta(seconds=121)


def test_registered_task_defaults_apply(client: Client, conn: Conn) -> None:
    from queue_engine import task

    @task("many.defaults", queue="reports", max_attempts=8, timeout_s=77)
    def handler(args: dict[str, Any]) -> None:
        return None

    [job_id] = client.enqueue_many([{"task": "many.defaults"}])
    job = client.get(job_id)
    assert (job.queue, job.max_attempts, job.timeout_s) == ("reports", 8, 77)


def test_duplicate_keys_inside_a_batch_resolve_to_the_first_item(
    client: Client, conn: Conn
) -> None:
    items: list[dict[str, Any]] = [
        {"task": "t", "args": {"i": 0}, "idempotency_key": "A"},
        {"task": "t", "args": {"i": 1}, "dedupe_key": "D"},
        {"task": "t", "args": {"i": 2}, "idempotency_key": "A"},
        {"task": "t", "args": {"i": 3}},
        {"task": "t", "args": {"i": 4}, "dedupe_key": "D"},
        {"task": "t", "args": {"i": 5}, "idempotency_key": "A", "dedupe_key": "D2"},
        {"task": "t", "args": {"i": 6}, "idempotency_key": "B", "dedupe_key": "D"},
        {"task": "t", "args": {"i": 7}},
    ]
    ids = client.enqueue_many(items)
    assert ids[2] == ids[0]
    assert ids[5] == ids[0]
    assert ids[4] == ids[1]
    assert ids[6] == ids[1]
    assert len({ids[0], ids[1], ids[3], ids[7]}) == 4
    by_id = index_by_id(conn)
    assert sorted(by_id.values()) == [0, 1, 3, 7]  # the first item of each key was stored
    assert [by_id[i] for i in ids] == [0, 1, 0, 3, 1, 0, 1, 7]


def test_keys_matching_existing_jobs_return_the_existing_ids(client: Client, conn: Conn) -> None:
    idem = client.enqueue("t", idempotency_key="I")
    dedupe = client.enqueue("t", dedupe_key="D")
    ids = client.enqueue_many(
        [
            {"task": "t", "args": {"i": 0}},
            {"task": "t", "args": {"i": 1}, "idempotency_key": "I"},
            {"task": "t", "args": {"i": 2}, "dedupe_key": "D"},
            {"task": "t", "args": {"i": 3}, "idempotency_key": "new"},
        ]
    )
    assert ids[1] == idem.id
    assert ids[2] == dedupe.id
    assert len(set(ids)) == 4
    assert count_jobs(conn) == 4
    # Sending the same batch again creates nothing new except the keyless item.
    again = client.enqueue_many(
        [
            {"task": "t", "args": {"i": 1}, "idempotency_key": "I"},
            {"task": "t", "args": {"i": 3}, "idempotency_key": "new"},
        ]
    )
    assert again == [idem.id, ids[3]]
    assert count_jobs(conn) == 4


def test_idempotency_key_holds_against_finished_jobs(client: Client, conn: Conn) -> None:
    job = client.enqueue("t", idempotency_key="I")
    client.cancel(job.id)
    assert client.enqueue_many([{"task": "t", "idempotency_key": "I"}]) == [job.id]
    assert count_jobs(conn) == 1


def test_dedupe_only_against_active_jobs(client: Client, conn: Conn) -> None:
    active = client.enqueue("t", dedupe_key="active")
    running = client.enqueue("t", dedupe_key="running")
    conn.execute(
        "UPDATE queue_engine.jobs SET status = 'running', attempt = 1, claimed_by = 'w'"
        " WHERE id = %s",
        (running.id,),
    )
    canceled = client.enqueue("t", dedupe_key="gone")
    client.cancel(canceled.id)
    ids = client.enqueue_many(
        [
            {"task": "t", "dedupe_key": "active"},
            {"task": "t", "dedupe_key": "running"},
            {"task": "t", "dedupe_key": "gone"},
            {"task": "t", "dedupe_key": "gone"},
        ]
    )
    assert ids[0] == active.id
    assert ids[1] == running.id
    assert ids[2] not in (active.id, running.id, canceled.id)
    assert ids[3] == ids[2]
    assert count_jobs(conn) == 4
    status = dict(conn.execute("SELECT id, status FROM queue_engine.jobs"))
    assert status[ids[2]] == "queued"
    assert status[canceled.id] == "canceled"


BAD_ITEMS: list[Any] = [
    {"task": "bad task"},
    {"task": "t", "priority": 1001},
    {"task": "t", "args": [1]},
    {"task": "t", "queue": "no spaces"},
    {"task": "t", "delay": -1},
    {"task": "t", "run_at": datetime(2030, 1, 1)},  # noqa: DTZ001
    {"task": "t", "dedupe_key": "k" * 256},
    {"task": "t", "priorty": 1},
    {"queue": "q"},
    "not a dict",
]


@pytest.mark.parametrize("keyed", [False, True])
def test_a_bad_item_anywhere_writes_nothing(client: Client, conn: Conn, keyed: bool) -> None:
    good = [
        {"task": "t", "args": {"i": i}, **({"idempotency_key": f"k{i}"} if keyed else {})}
        for i in range(50)
    ]
    for bad in BAD_ITEMS:
        for position in (0, 25, 50):
            items = [*good[:position], bad, *good[position:]]
            with pytest.raises(ValidationError, match=rf"^jobs\[{position}\]"):
                client.enqueue_many(items)
    assert count_jobs(conn) == 0
    # The keys were not taken either.
    assert len(set(client.enqueue_many(good))) == 50


def test_enqueue_many_refuses_a_dict(client: Client, conn: Conn) -> None:
    with pytest.raises(ValidationError, match="list of dicts"):
        client.enqueue_many({"task": "t"})  # type: ignore[arg-type]
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("keyed", [False, True])
def test_caller_connection_rollback_and_commit(
    client: Client, conn: Conn, dsn: str, keyed: bool
) -> None:
    items = [
        {"task": "t", "args": {"i": i}, **({"idempotency_key": f"k{i}"} if keyed else {})}
        for i in range(100)
    ]
    with psycopg.connect(dsn) as tx:
        ids = client.enqueue_many(items, conn=tx)
        assert len(ids) == 100
        assert count_jobs(conn) == 0
        tx.rollback()
        assert count_jobs(conn) == 0
        ids = Client(conn=tx).enqueue_many(items)
        assert count_jobs(conn) == 0
        tx.commit()
    assert count_jobs(conn) == 100
    by_id = index_by_id(conn)
    assert [by_id[i] for i in ids] == list(range(100))


def test_enqueue_many_notifies_once_per_queue(client: Client, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as listen:
        listen.execute('LISTEN "queue_engine.jobs"')
        client.enqueue_many(
            [{"task": "t", "queue": q} for q in ["a", "b", "a", "a", "b"]]
            + [{"task": "t", "queue": "later", "delay": 600}]
        )
        got = [n.payload for n in listen.notifies(timeout=0.5)]
    assert sorted(got) == ["a", "b"]
