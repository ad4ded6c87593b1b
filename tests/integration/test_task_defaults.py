"""Contract: a task's defaults apply wherever its jobs come from (migration 0028, issue 33).

A worker publishes its registry (``task_publications.publish``); then every
enqueue path that leaves queue, priority, max_attempts, timeout_s or
lease_ttl_s unset gets the task's published values: ``Client`` (the plain
single insert, the keyed one, the one with more options), ``AsyncClient``,
``enqueue_many`` (plain, mixed, keyed), a plain SQL ``INSERT``, the SQL
function ``enqueue()``, the HTTP API (single, batch, trigger) and a handler's
follow-ups, a workflow's nodes (from Python and from SQL). What the caller
sets always wins; a task declared in the
producer's own process uses its declaration; a task nobody published gets the
built-in defaults, which are the same in SQL and Python. The newest
publication is in effect, a publication goes with its worker's row, and live
workers that disagree are reported. Down to 27 and up again keeps jobs and
restores the column defaults.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from support.web import PRODUCER, web_client

from queue_engine import AsyncClient, Client, Workflow, task
from queue_engine.foundation.migrate import Migrator
from queue_engine.producer.kept_defaults import KEEP_S, KeptDefaults
from queue_engine.producer.retry import FixedBackoff
from queue_engine.producer.task_publications import publish, read
from queue_engine.producer.tasks import TaskDefinition
from queue_engine.producer.validation import DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, DEFAULT_QUEUE
from queue_engine.worker import store

S = "queue_engine"
Conn = psycopg.Connection[Any]

#: What the worker of these tests declares for "td.email".
EMAIL = {"queue": "email", "priority": 7, "max_attempts": 3, "timeout_s": 30, "lease_ttl_s": 45}
FIVE = tuple(EMAIL)
BUILT_IN = (DEFAULT_QUEUE, DEFAULT_PRIORITY, DEFAULT_MAX_ATTEMPTS, None, None)


def _noop(args: dict[str, Any]) -> None:
    return None


def definition(name: str, **options: Any) -> TaskDefinition:
    return TaskDefinition(name=name, handler=_noop, **options)


def register_worker(conn: Conn, worker_id: str, *, host: str = "host-a", pid: int = 101) -> None:
    store.register(conn, S, worker_id=worker_id, queue="email", host=host, pid=pid, state="idle")


def publish_as(
    conn: Conn, worker_id: str, *definitions: TaskDefinition, host: str = "host-a", pid: int = 101
) -> int:
    """What a worker does at start: register its row, then publish its registry."""
    register_worker(conn, worker_id, host=host, pid=pid)
    return publish(conn, S, definitions, worker_id=worker_id, host=host, pid=pid, app="td_app")


@pytest.fixture
def published(conn: Conn) -> None:
    assert publish_as(conn, "host-a:101:aaaaaa", definition("td.email", **EMAIL)) == 1


def row(conn: Conn, job_id: int) -> tuple[Any, ...]:
    found = conn.execute(
        "SELECT queue, priority, max_attempts, timeout_s, lease_ttl_s FROM queue_engine.jobs "
        "WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert found is not None
    return tuple(found)


def five(job: Any) -> tuple[Any, ...]:
    return tuple(getattr(job, name) for name in FIVE)


EXPECTED = tuple(EMAIL.values())


# -- the built-in defaults ----------------------------------------------------------------------


def test_the_built_in_defaults_are_the_same_in_sql_and_python(conn: Conn) -> None:
    assert conn.execute("SELECT * FROM queue_engine.builtin_task_defaults()").fetchone() == (
        BUILT_IN
    )
    assert conn.execute("SELECT * FROM queue_engine.task_defaults_of('td.nobody')").fetchone() == (
        BUILT_IN
    )


def test_a_task_nobody_published_gets_the_built_in_defaults_everywhere(
    conn: Conn, client: Client
) -> None:
    ids = [
        client.enqueue("td.nobody").id,
        client.enqueue("td.nobody", idempotency_key="td-nobody").id,
        *client.enqueue_many([{"task": "td.nobody"}, {"task": "td.nobody", "dedupe_key": "d"}]),
        conn.execute(
            "INSERT INTO queue_engine.jobs (task) VALUES ('td.nobody') RETURNING id"
        ).fetchone()[0],  # type: ignore[index]
        conn.execute("SELECT queue_engine.enqueue('td.nobody')").fetchone()[0],  # type: ignore[index]
    ]
    assert [row(conn, i) for i in ids] == [BUILT_IN] * len(ids)
    assert five(client.enqueue("td.nobody")) == BUILT_IN


# -- Client and AsyncClient ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},  # the usual call: task only (the kept plain request)
        {"args": {"to": "ada@example.com"}},
        {"partition_key": "p1", "producer": "app"},  # another option: the full validation
        {"idempotency_key": "td-1"},  # the keyed statement
        {"dedupe_key": "td-d"},
    ],
    ids=["task-only", "args", "other-options", "idempotency-key", "dedupe-key"],
)
def test_client_enqueue_takes_the_published_defaults(
    conn: Conn, client: Client, published: None, options: dict[str, Any]
) -> None:
    job = client.enqueue("td.email", **options)
    assert five(job) == EXPECTED  # the Job the call answers
    assert row(conn, job.id) == EXPECTED  # and the row
    assert five(client.get(job.id)) == EXPECTED


@pytest.mark.parametrize("name", FIVE)
def test_what_the_caller_sets_wins_over_the_published_defaults(
    conn: Conn, client: Client, published: None, name: str
) -> None:
    given = {"queue": "other", "priority": 1, "max_attempts": 9, "timeout_s": 5, "lease_ttl_s": 6}
    job = client.enqueue("td.email", **{name: given[name]})
    expected = tuple(given[n] if n == name else EMAIL[n] for n in FIVE)
    assert five(job) == expected
    assert row(conn, job.id) == expected


def test_a_caller_that_sets_queue_priority_and_attempts_still_gets_timeout_and_lease(
    conn: Conn, client: Client, published: None
) -> None:
    # Unlike a plain SQL INSERT naming those three, every client path looks up.
    given = {"queue": "q", "priority": 1, "max_attempts": 2}
    expected = ("q", 1, 2, 30, 45)
    single = client.enqueue("td.email", **given)
    keyed = client.enqueue("td.email", idempotency_key="td-3", **given)
    assert five(single) == five(keyed) == expected
    bulk = client.enqueue_many([{"task": "td.email", **given}] * 2)
    keyed_bulk = client.enqueue_many([{"task": "td.email", "dedupe_key": "td-3", **given}])
    assert [row(conn, i) for i in (single.id, keyed.id, *bulk, *keyed_bulk)] == [expected] * 5


def test_the_usual_call_reuses_the_answer_for_a_second(
    conn: Conn, client: Client, published: None
) -> None:
    # The first enqueue(task, queue, args) looks the defaults up; the calls
    # after it send them as given for kept_defaults.keep_s (1 s), so a new
    # publication reaches this producer within that second, not at once.
    now = [0.0]
    client.kept_defaults = KeptDefaults(clock=lambda: now[0])
    first = client.enqueue("td.email", args={"n": 1})
    publish_as(conn, "host-e:505:eeeeee", definition("td.email", queue="email", max_attempts=8))
    kept = client.enqueue("td.email", args={"n": 2})
    assert (first.max_attempts, kept.max_attempts, row(conn, kept.id)) == (3, 3, EXPECTED)
    other_call = client.enqueue("td.email", args={"n": 3}, producer="p")  # not the usual call
    assert other_call.max_attempts == 8
    now[0] += KEEP_S
    assert client.enqueue("td.email").max_attempts == 8
    client.kept_defaults.keep_s = 0
    publish_as(conn, "host-f:606:ffffff", definition("td.email", queue="email", max_attempts=2))
    assert client.enqueue("td.email").max_attempts == 2


def test_the_queue_routes_the_job_to_the_tasks_workers(
    conn: Conn, client: Client, published: None
) -> None:
    job = client.enqueue("td.email")
    claimable = conn.execute(
        "SELECT id FROM queue_engine.jobs WHERE queue = 'email' AND status = 'queued'"
    ).fetchall()
    assert claimable == [(job.id,)]


def test_async_client_takes_the_published_defaults_and_explicit_values_win(
    dsn: str, conn: Conn, published: None
) -> None:
    async def main() -> list[Any]:
        async with AsyncClient(dsn) as client:
            return [
                await client.enqueue("td.email"),
                await client.enqueue("td.email", args={"a": 1}, idempotency_key="td-async"),
                await client.enqueue("td.email", queue="other", max_attempts=9),
                await client.enqueue_many([{"task": "td.email"}, {"task": "td.email"}]),
            ]

    plain, keyed, explicit, ids = asyncio.run(main())
    assert five(plain) == five(keyed) == EXPECTED
    assert [row(conn, j.id) for j in (plain, keyed)] == [EXPECTED, EXPECTED]
    assert row(conn, explicit.id) == ("other", 7, 9, 30, 45)
    assert [row(conn, i) for i in ids] == [EXPECTED, EXPECTED]


def test_a_task_declared_in_the_producers_process_keeps_its_own_declaration(
    conn: Conn, client: Client, published: None
) -> None:
    # The producer imported a newer version of the app: its own declaration
    # applies, whole (its lack of a lease too), and nothing is looked up.
    @task("td.email", queue="email.v2", priority=2, max_attempts=4)
    def handler(args: dict[str, Any]) -> None:
        return None

    declared = ("email.v2", 2, 4, None, None)
    job = client.enqueue("td.email")
    assert five(job) == row(conn, job.id) == declared
    [bulk] = client.enqueue_many([{"task": "td.email"}])
    assert row(conn, bulk) == declared


# -- bulk ---------------------------------------------------------------------------------------


def test_enqueue_many_takes_each_rows_defaults(conn: Conn, client: Client, published: None) -> None:
    publish_as(conn, "host-b:202:bbbbbb", definition("td.report", queue="reports", priority=900))
    ids = client.enqueue_many(
        [
            {"task": "td.email"},
            {"task": "td.report", "args": {"n": 1}},
            {"task": "td.nobody"},
            {"task": "td.email", "max_attempts": 1, "queue": "q2"},
        ]
    )
    assert [row(conn, i) for i in ids] == [
        EXPECTED,
        ("reports", 900, 5, None, None),
        BUILT_IN,
        ("q2", 7, 1, 30, 45),
    ]


def test_a_uniform_batch_takes_the_defaults(conn: Conn, client: Client, published: None) -> None:
    ids = client.enqueue_many([{"task": "td.email", "args": {"i": i}} for i in range(50)])
    assert {row(conn, i) for i in ids} == {EXPECTED}


def test_a_keyed_batch_takes_the_defaults(conn: Conn, client: Client, published: None) -> None:
    ids = client.enqueue_many(
        [
            {"task": "td.email", "idempotency_key": "k1"},
            {"task": "td.nobody", "dedupe_key": "k2"},
            {"task": "td.email", "idempotency_key": "k3", "priority": 0},
        ]
    )
    assert [row(conn, i) for i in ids] == [EXPECTED, BUILT_IN, ("email", 0, 3, 30, 45)]


# -- SQL ----------------------------------------------------------------------------------------


def test_a_plain_sql_insert_takes_the_defaults_of_what_it_leaves_out(
    conn: Conn, published: None
) -> None:
    def insert(columns: str, values: str) -> tuple[Any, ...]:
        new = conn.execute(
            f"INSERT INTO queue_engine.jobs ({columns}) VALUES ({values}) RETURNING id"
        ).fetchone()
        assert new is not None
        return row(conn, new[0])

    assert insert("task", "'td.email'") == EXPECTED
    assert insert("task, args", "'td.email', '{\"a\": 1}'") == EXPECTED
    assert insert("task, queue", "'td.email', 'other'") == ("other", 7, 3, 30, 45)
    assert insert("task, priority, timeout_s", "'td.email', 1, 9") == ("email", 1, 3, 9, 45)
    assert insert("task, max_attempts", "'td.email', 8") == ("email", 7, 8, 30, 45)
    assert insert("task, queue", "'td.email', NULL") == EXPECTED  # NULL is left out
    # Naming all three of queue, priority and max_attempts is taken as complete:
    # a NULL timeout and lease stay NULL (the worker's settings), as documented.
    assert insert("task, queue, priority, max_attempts", "'td.email', 'q', 1, 2") == (
        "q",
        1,
        2,
        None,
        None,
    )


def test_the_sql_function_takes_the_defaults_and_explicit_values_win(
    conn: Conn, published: None
) -> None:
    def call(arguments: str) -> tuple[Any, ...]:
        new = conn.execute(f"SELECT queue_engine.enqueue({arguments})").fetchone()
        assert new is not None
        return row(conn, new[0])

    assert call("'td.email'") == EXPECTED
    assert call("'td.email', p_args => '{\"a\": 1}'") == EXPECTED
    assert call("'td.email', p_queue => 'other', p_max_attempts => 9") == ("other", 7, 9, 30, 45)
    # Unlike a plain INSERT, the function fills every parameter left NULL.
    assert call("'td.email', p_queue => 'q', p_priority => 1, p_max_attempts => 2") == (
        "q",
        1,
        2,
        30,
        45,
    )
    assert call("'td.email', p_timeout_s => 1, p_lease_ttl_s => 2") == ("email", 7, 3, 1, 2)
    # A conflict still answers the job holding the key.
    first = conn.execute("SELECT queue_engine.enqueue('td.email', p_idempotency_key => 'f')")
    again = conn.execute("SELECT queue_engine.enqueue('td.email', p_idempotency_key => 'f')")
    assert first.fetchone() == again.fetchone()


# -- HTTP ---------------------------------------------------------------------------------------


@pytest.fixture
def api(dsn: str) -> Iterator[TestClient]:
    with web_client(dsn) as c:
        yield c


def test_the_http_api_takes_the_defaults_and_explicit_values_win(
    api: TestClient, conn: Conn, published: None
) -> None:
    created = api.post("/api/v1/jobs", json={"task": "td.email"}, headers=PRODUCER)
    assert created.status_code == 201, created.text
    body = created.json()
    assert tuple(body[n] for n in FIVE) == EXPECTED
    assert row(conn, body["id"]) == EXPECTED

    explicit = api.post(
        "/api/v1/jobs", json={"task": "td.email", "priority": 500}, headers=PRODUCER
    ).json()
    assert row(conn, explicit["id"]) == ("email", 500, 3, 30, 45)

    batch = api.post(
        "/api/v1/jobs/batch",
        json={"jobs": [{"task": "td.email"}, {"task": "td.email", "queue": "q"}]},
        headers=PRODUCER,
    )
    assert batch.status_code == 201, batch.text
    assert [row(conn, i) for i in batch.json()["ids"]] == [EXPECTED, ("q", 7, 3, 30, 45)]

    triggered = api.post("/api/v1/jobs/trigger", json={"task": "td.email"}, headers=PRODUCER)
    assert row(conn, triggered.json()["job_id"]) == EXPECTED


def test_an_idempotent_resend_is_the_same_job_though_the_defaults_changed(
    api: TestClient, conn: Conn, published: None
) -> None:
    headers = {**PRODUCER, "Idempotency-Key": "td-http-1"}
    first = api.post("/api/v1/jobs", json={"task": "td.email"}, headers=headers)
    assert first.status_code == 201, first.text
    # A new version of the worker publishes other defaults; the re-send asked
    # for "the task's defaults" both times, so it is the same request.
    publish_as(conn, "host-c:303:cccccc", definition("td.email", queue="email", max_attempts=8))
    again = api.post("/api/v1/jobs", json={"task": "td.email"}, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == first.json()["id"]
    # A different explicit value is still refused.
    other = api.post("/api/v1/jobs", json={"task": "td.email", "priority": 1}, headers=headers)
    assert other.status_code == 422, other.text


# -- follow-ups ---------------------------------------------------------------------------------


def test_a_handlers_followups_take_the_defaults(dsn: str, conn: Conn, client: Client) -> None:
    import followups_app
    from support.workers import running_worker, wait_until

    publish_as(conn, "host-d:404:dddddd", definition("td.child", **EMAIL))
    # followups_app sends its children to its own queue (explicit, so it wins).
    children = [{"task": "td.child", "args": {"n": 1}}, {"task": "td.child", "priority": 1}]
    parent = client.enqueue(
        "followups.parent", queue=followups_app.QUEUE, args={"children": children}
    )
    with running_worker(dsn, tasks=followups_app.private_registry(), queue=followups_app.QUEUE):
        wait_until(lambda: client.get(parent.id).status == "succeeded", what="the parent's success")
    found = conn.execute(
        "SELECT queue, priority, max_attempts, timeout_s, lease_ttl_s FROM queue_engine.jobs "
        "WHERE task = 'td.child' ORDER BY id"
    ).fetchall()
    assert found == [
        (followups_app.OUT, 7, 3, 30, 45),
        (followups_app.OUT, 1, 3, 30, 45),
    ]


# -- workflows ----------------------------------------------------------------------------------


def test_a_workflows_nodes_take_their_tasks_defaults(
    conn: Conn, client: Client, published: None
) -> None:
    wf = Workflow("td.flow")
    wf.add("send", "td.email")
    wf.add("urgent", "td.email", priority=1, after=["send"])
    wf.add("other", "td.nobody", after=["send"])
    wf.input("approve", after=["send"], timeout_s=600)
    info = client.start_workflow(wf)
    nodes = dict(
        conn.execute(
            "SELECT node, (queue, priority, max_attempts, timeout_s, lease_ttl_s)::text "
            "FROM queue_engine.jobs WHERE workflow_id = %s",
            (info.id,),
        ).fetchall()
    )
    assert nodes == {
        "send": "(email,7,3,30,45)",
        "urgent": "(email,1,3,30,45)",
        "other": "(default,100,5,,)",
        "approve": "(default,100,1,600,)",  # an input node: its own timeout, 1 attempt
    }


def test_start_workflow_from_sql_looks_each_node_up_by_its_task(
    conn: Conn, published: None
) -> None:
    # A caller that does not know "defaults_of" (another language) leaves it out.
    conn.execute(
        "SELECT queue_engine.start_workflow('td.sql', %s::jsonb)",
        ('[{"node": "a", "task": "td.email"}, {"node": "b", "task": "td.email", "queue": "q"}]',),
    )
    assert conn.execute(
        "SELECT node, queue, priority, max_attempts, timeout_s, lease_ttl_s FROM queue_engine.jobs"
        " WHERE workflow_id IS NOT NULL ORDER BY node"
    ).fetchall() == [("a", *EXPECTED), ("b", "q", 7, 3, 30, 45)]


# -- publications -------------------------------------------------------------------------------


def test_the_newest_publication_wins_and_live_workers_that_disagree_are_reported(
    conn: Conn, client: Client
) -> None:
    publish_as(conn, "host-a:1:aaaaaa", definition("td.multi", queue="m", max_attempts=3))
    publish_as(
        conn,
        "host-b:2:bbbbbb",
        definition("td.multi", queue="m", max_attempts=5, retry=FixedBackoff(2)),
        host="host-b",
        pid=2,
    )
    assert client.enqueue("td.multi").max_attempts == 5  # host-b published last

    [known] = read(conn, S, dead_after_s=60, task="td.multi")
    effective = known.effective
    assert (effective.worker_id, effective.host, effective.pid, effective.app) == (
        "host-b:2:bbbbbb",
        "host-b",
        2,
        "td_app",
    )
    assert known.defaults.retry == {"kind": "fixed", "seconds": 2.0}
    assert [p.worker_id for p in known.publications] == ["host-b:2:bbbbbb", "host-a:1:aaaaaa"]
    assert [p.defaults.max_attempts for p in known.publications] == [5, 3]
    assert {p.liveness for p in known.publications} == {"live"}
    assert known.conflicts == {"max_attempts": [5, 3]}

    # The older worker stops: its publication is history, not a conflict.
    conn.execute("UPDATE queue_engine.workers SET stopped_at = now() WHERE id = 'host-a:1:aaaaaa'")
    [known] = read(conn, S, dead_after_s=60, task="td.multi")
    assert [p.liveness for p in known.publications] == ["live", "stopped"]
    assert known.conflicts == {}


def test_a_publication_goes_with_its_workers_row_and_the_defaults_stay(
    conn: Conn, client: Client, published: None
) -> None:
    conn.execute("DELETE FROM queue_engine.workers WHERE id = 'host-a:101:aaaaaa'")  # pruned
    assert conn.execute("SELECT count(*) FROM queue_engine.task_publications").fetchone() == (0,)
    [known] = read(conn, S, dead_after_s=60)
    assert known.task == "td.email" and known.publications == ()
    assert known.effective.liveness == "gone" and known.defaults.applied() == EXPECTED
    assert five(client.enqueue("td.email")) == EXPECTED


def test_a_worker_publishes_its_registry_when_it_starts(dsn: str, conn: Conn) -> None:
    from support.workers import running_worker, wait_until

    @task("td.started", queue="wt", priority=3, max_attempts=2, lease_ttl_s=40)
    def handler(args: dict[str, Any]) -> None:
        return None

    from queue_engine.producer.tasks import registry

    with running_worker(dsn, tasks=registry) as worker:
        wait_until(lambda: read(conn, S, dead_after_s=60, task="td.started"), what="publication")
        [known] = read(conn, S, dead_after_s=60, task="td.started")
        assert known.effective.worker_id == worker.worker_id
        assert known.defaults.applied() == ("wt", 3, 2, None, 40)
        assert known.defaults.retry is not None and known.defaults.retry["kind"] == "exponential"


# -- the migration ------------------------------------------------------------------------------


def test_down_to_27_keeps_the_jobs_and_restores_the_column_defaults(
    dsn: str, conn: Conn, client: Client, published: None
) -> None:
    job = client.enqueue("td.email")
    Migrator(dsn).down(27)
    assert row(conn, job.id) == EXPECTED  # the job keeps what it was enqueued with
    assert conn.execute("SELECT to_regclass('queue_engine.task_defaults')").fetchone() == (None,)
    new = conn.execute("INSERT INTO queue_engine.jobs (task) VALUES ('td.email') RETURNING id")
    assert row(conn, new.fetchone()[0]) == BUILT_IN  # type: ignore[index]
    fn = conn.execute("SELECT queue_engine.enqueue('td.email')").fetchone()
    assert row(conn, fn[0]) == BUILT_IN  # type: ignore[index]

    Migrator(dsn).up()
    assert conn.execute("SELECT count(*) FROM queue_engine.task_defaults").fetchone() == (0,)
    with Client(dsn) as fresh:  # `client` keeps what it was answered for a second
        assert five(fresh.enqueue("td.email")) == BUILT_IN  # published again at the next start
