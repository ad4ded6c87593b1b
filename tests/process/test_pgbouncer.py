"""Through a real PgBouncer in transaction-pooling mode (docs/operations.md, "Connection poolers").

Contracts: producers work through it (Client and AsyncClient with
``prepared_statements=False``, many calls past psycopg's prepare threshold,
bulk enqueue, the SQL ``enqueue`` function, and starting a workflow), while
the daemons, which need a session of their own, refuse to start behind it with
a clear one-line reason and exit 2 instead of silently never waking. The same
daemons start against the server directly (the check cannot accuse a direct
connection).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from support.pgbouncer import transaction_pooler

from queue_engine import AsyncClient, Client, Workflow
from queue_engine.daemon.pooler import shared_session_evidence
from queue_engine.foundation.exit_codes import ExitCode

BIN = Path(sys.executable).parent


@pytest.fixture
def bouncer(dsn: str) -> Iterator[str]:
    with transaction_pooler(dsn) as pooled:
        yield pooled


def test_producers_work_through_transaction_pooling(bouncer: str, dsn: str) -> None:
    with Client(bouncer, prepared_statements=False, pool_size=3) as client:
        ids = [client.enqueue("t.one", args={"i": i}).id for i in range(30)]
        ids += client.enqueue_many([{"task": "t.bulk", "args": {"i": i}} for i in range(50)])
        keyed = client.enqueue("t.key", idempotency_key="k")
        assert client.enqueue("t.key", idempotency_key="k").id == keyed.id
        assert client.get(ids[0]).args == {"i": 0}
        wf = Workflow("through-pooler")
        wf.add("a", "t.one")
        wf.add("b", "t.one", after=["a"])
        info = client.start_workflow(wf)
        assert client.get_workflow(info.id).node_count == 2

    async def produce() -> int:
        async with AsyncClient(bouncer, prepared_statements=False) as aclient:
            for i in range(20):
                await aclient.enqueue("t.async", args={"i": i})
            return len(await aclient.list(task="t.async"))

    assert asyncio.run(produce()) == 20
    with psycopg.connect(bouncer, autocommit=True, prepare_threshold=None) as conn:
        for _ in range(10):
            conn.execute("SELECT queue_engine.enqueue('t.sql')")
    with psycopg.connect(dsn) as direct:
        counts = dict(
            direct.execute("SELECT task, count(*) FROM queue_engine.jobs GROUP BY task").fetchall()
        )
    assert counts == {"t.one": 32, "t.bulk": 50, "t.key": 1, "t.async": 20, "t.sql": 10}


def test_the_session_check_sees_the_pooler_and_not_a_direct_connection(
    bouncer: str, dsn: str
) -> None:
    assert shared_session_evidence(bouncer) is not None
    assert shared_session_evidence(dsn) is None


@pytest.mark.parametrize(
    ("command", "role"),
    [
        (
            ["queue-claim-worker", "--queue", "q", "--app", "queue_engine.demo.bench_app"],
            "queue-claim-worker",
        ),
        (["queue-orchestrator"], "queue-orchestrator"),
        (["queue-scheduler"], "queue-scheduler"),
    ],
)
def test_daemons_refuse_to_start_behind_transaction_pooling(
    bouncer: str, command: list[str], role: str
) -> None:
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:], "--dsn", bouncer],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert f"{role} needs a database session of its own" in done.stderr
    assert "transaction-pooling proxy" in done.stderr
    assert "Traceback" not in done.stderr
