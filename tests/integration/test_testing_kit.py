"""The testing kit (``queue_engine.testing``) against a real Postgres.

Assertions on enqueued work (and their failure messages), ``drain`` running
jobs through the real worker in this process (retries made due with
``run_delayed``, errors re-raised with ``raise_errors``, ``limit``), and the
opt-in pytest plugin's fixtures, run by ``pytester`` in a child session.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Generator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queue_engine import Client
from queue_engine.producer.retry import FixedBackoff, Snooze
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry
from queue_engine.testing import (
    DrainError,
    assert_enqueued,
    drain,
    enqueued_jobs,
    refute_enqueued,
)

pytest_plugins = ["pytester"]

Q = "kit"


def _registry(*definitions: TaskDefinition) -> TaskRegistry:
    registry = TaskRegistry()
    for definition in definitions:
        registry.register(definition)
    return registry


# -- assertions -------------------------------------------------------------


def test_assert_enqueued_matches_args_as_a_subset(client: Client) -> None:
    job = client.enqueue("email.send", queue=Q, args={"to": "a@x", "meta": {"lang": "fr", "n": 1}})
    client.enqueue("email.send", queue=Q, args={"to": "b@x"})

    found = assert_enqueued(client, task="email.send", args={"meta": {"lang": "fr"}})
    assert found.id == job.id
    assert [j.args["to"] for j in enqueued_jobs(client, task="email.send")] == ["a@x", "b@x"]
    assert enqueued_jobs(client, queue="other") == []


def test_assert_enqueued_failure_lists_what_was_enqueued(client: Client) -> None:
    client.enqueue("email.send", queue=Q, args={"to": "a@x"})
    client.enqueue("report.build", args={"day": "2026-11-23"})

    with pytest.raises(AssertionError) as failure:
        assert_enqueued(client, task="email.sned", args={"to": "a@x"})
    message = str(failure.value)
    assert "task='email.sned'" in message
    assert "2 job(s) were enqueued" in message
    assert "task='email.send' queue='kit' args={'to': 'a@x'} status=queued" in message
    assert "task='report.build' queue='default'" in message


def test_assert_enqueued_on_an_empty_table_says_so(client: Client) -> None:
    with pytest.raises(AssertionError, match="no job was enqueued at all"):
        assert_enqueued(client, task="anything")


def test_refute_enqueued(client: Client) -> None:
    refute_enqueued(client, task="email.send")
    client.enqueue("email.send", queue=Q, args={"to": "a@x"})
    refute_enqueued(client, task="email.send", args={"to": "b@x"})
    with pytest.raises(AssertionError, match=r"expected no job enqueued .* found 1"):
        refute_enqueued(client, task="email.send")


def test_assertions_see_an_uncommitted_transaction_through_its_client(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:  # not autocommit: one open transaction
        bound = Client(conn=conn)
        bound.enqueue("email.send", args={"to": "a@x"})
        assert_enqueued(bound, task="email.send")
        refute_enqueued(dsn, task="email.send")  # another session: not committed yet
        conn.rollback()


def test_assertions_work_on_a_dsn(dsn: str, client: Client) -> None:
    client.enqueue("email.send", args={"to": "a@x"})
    assert assert_enqueued(dsn, task="email.send").args == {"to": "a@x"}


# -- drain ------------------------------------------------------------------


def test_drain_runs_due_jobs_of_every_kind_and_returns_outcomes(client: Client) -> None:
    def plain(args: dict[str, Any]) -> Any:
        return {"double": args["n"] * 2}

    async def coroutine(args: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        return "async"

    def steps(args: dict[str, Any], ctx: Any) -> Generator[int, None, str]:
        yield from range(3)
        return f"steps of job {ctx.job.id}"

    async def async_steps(args: dict[str, Any]) -> AsyncGenerator[int, None]:
        for i in range(2):
            await asyncio.sleep(0)
            yield i
        raise ValueError("async steps broke")

    tasks = _registry(
        TaskDefinition("plain", plain, queue=Q),
        TaskDefinition("coro", coroutine, queue=Q),
        TaskDefinition("steps", steps, queue=Q, wants_context=True),
        TaskDefinition("async_steps", async_steps, queue=Q),
    )
    a = client.enqueue("plain", queue=Q, args={"n": 21})
    b = client.enqueue("coro", queue=Q)
    c = client.enqueue("steps", queue=Q)
    d = client.enqueue("async_steps", queue=Q, max_attempts=1)
    later = client.enqueue("plain", queue=Q, args={"n": 1}, delay=3600)

    outcomes = drain(client, queue=Q, tasks=tasks)

    assert [(o.job_id, o.status, o.attempt) for o in outcomes] == [
        (a.id, "succeeded", 1),
        (b.id, "succeeded", 1),
        (c.id, "succeeded", 1),
        (d.id, "failed", 1),
    ]
    assert [o.result for o in outcomes] == [{"double": 42}, "async", f"steps of job {c.id}", None]
    assert outcomes[-1].error == "ValueError: async steps broke"
    assert client.get(later.id).status == "queued"  # delayed: not run without run_delayed
    refute_enqueued(client, queue=Q, args={"n": 21})


def test_drain_run_delayed_retries_a_failing_then_succeeding_handler(client: Client) -> None:
    calls: list[int] = []

    def flaky(args: dict[str, Any], ctx: Any) -> str:
        calls.append(ctx.job.attempt)
        if len(calls) < 3:
            raise RuntimeError(f"boom {len(calls)}")
        return "ok"

    tasks = _registry(
        TaskDefinition("flaky", flaky, queue=Q, retry=FixedBackoff(3600), wants_context=True)
    )
    job = client.enqueue("flaky", queue=Q, max_attempts=5)

    # Without run_delayed the retry waits its hour: one run, put back.
    first = drain(client, queue=Q, tasks=tasks)
    assert [(o.attempt, o.status) for o in first] == [(1, "queued")]
    assert first[0].error == "RuntimeError: boom 1"

    rest = drain(client, queue=Q, tasks=tasks, run_delayed=True)
    assert [(o.attempt, o.status) for o in rest] == [(2, "queued"), (3, "succeeded")]
    assert rest[-1].result == "ok"
    assert client.get(job.id).status == "succeeded"


def test_drain_run_delayed_runs_a_snoozed_job_again(client: Client) -> None:
    seen: list[int] = []

    def sleepy(args: dict[str, Any]) -> str:
        seen.append(1)
        if len(seen) == 1:
            raise Snooze(3600)
        return "awake"

    tasks = _registry(TaskDefinition("sleepy", sleepy, queue=Q))
    client.enqueue("sleepy", queue=Q)
    outcomes = drain(client, queue=Q, tasks=tasks, run_delayed=True, raise_errors=True)
    assert [o.status for o in outcomes] == ["queued", "succeeded"]  # a snooze is no error


def test_drain_raise_errors_reraises_the_handler_exception(client: Client) -> None:
    class Broken(Exception):
        pass

    def broken(args: dict[str, Any]) -> None:
        raise Broken(f"bad input {args['n']}")

    tasks = _registry(TaskDefinition("broken", broken, queue=Q))
    job = client.enqueue("broken", queue=Q, args={"n": 7}, max_attempts=1)
    with pytest.raises(Broken, match="bad input 7"):
        drain(client, queue=Q, tasks=tasks, raise_errors=True)
    # The job was finished as the engine would, before the error reached the test.
    after = client.get(job.id)
    assert after.status == "failed"
    assert "bad input 7" in (after.error or "")


def test_drain_stops_after_limit(client: Client) -> None:
    tasks = _registry(TaskDefinition("noop", lambda args: args["i"], queue=Q))
    for i in range(5):
        client.enqueue("noop", queue=Q, args={"i": i})
    outcomes = drain(client, queue=Q, tasks=tasks, limit=2)
    assert [o.result for o in outcomes] == [0, 1]
    assert len(enqueued_jobs(client, task="noop")) == 3
    assert [o.result for o in drain(client, queue=Q, tasks=tasks)] == [2, 3, 4]


def test_drain_times_out_on_a_job_snoozed_forever(client: Client) -> None:
    def never(args: dict[str, Any]) -> None:
        raise Snooze(60)

    tasks = _registry(TaskDefinition("never", never, queue=Q))
    client.enqueue("never", queue=Q)
    with pytest.raises(DrainError, match="not drained within"):
        drain(client, queue=Q, tasks=tasks, run_delayed=True, timeout_s=1.5)


# -- the pytest plugin ------------------------------------------------------


def test_plugin_fixtures_give_each_test_a_clean_migrated_database(
    pytester: pytest.Pytester, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Borrow this session's server, as a user's CI sets QUEUE_ENGINE_TEST_DSN.
    monkeypatch.setenv("QUEUE_ENGINE_TEST_DSN", pg_server.admin_dsn)
    pytester.makepyfile(
        test_app="""
        import os
        from queue_engine import Client
        from queue_engine.testing import assert_enqueued, drain, refute_enqueued
        from queue_engine.producer.tasks import TaskDefinition, TaskRegistry

        def test_first(qe_client, qe_dsn, qe_database):
            assert qe_dsn == os.environ["QUEUE_ENGINE_TEST_DSN"]
            qe_client.enqueue("email.send", args={"to": "a@x"})
            assert_enqueued(qe_client, task="email.send", args={"to": "a@x"})

        def test_second_starts_clean(qe_client):
            refute_enqueued(qe_client, task="email.send")
            tasks = TaskRegistry()
            tasks.register(TaskDefinition("double", lambda args: args["n"] * 2))
            qe_client.enqueue("double", args={"n": 4})
            assert [o.result for o in drain(qe_client, tasks=tasks)] == [8]

        def test_environ_points_app_code_at_the_database(qe_environ):
            with Client() as client:  # the app's own client, configured by environment
                client.enqueue("email.send")
                assert_enqueued(client, task="email.send")
        """
    )
    result = pytester.runpytest_subprocess("-p", "queue_engine.testing.pytest_plugin", "-q")
    result.assert_outcomes(passed=3)


def test_the_testing_guide_example_runs(
    pytester: pytest.Pytester, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/guides/testing.md's example, run as written: the guide cannot rot."""
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "testing.md").read_text()
    blocks = {}
    for block in re.findall(r"```python\n(.*?)```", guide, flags=re.DOTALL):
        first = block.splitlines()[0]
        if first.startswith("# ") and first.endswith(".py"):
            blocks[first[2:]] = block
    assert set(blocks) == {
        "conftest.py",
        "myapp/jobs.py",
        "tests/test_signup.py",
        "tests/test_schedules.py",
        "tests/test_async_signup.py",
    }
    for path, text in blocks.items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (pytester.path / "myapp" / "__init__.py").write_text("")
    monkeypatch.setenv("QUEUE_ENGINE_TEST_DSN", pg_server.admin_dsn)
    result = pytester.runpytest_subprocess("-q", "tests")
    result.assert_outcomes(passed=6)


def test_drain_with_a_client_in_an_open_transaction_runs_only_committed_jobs(dsn: str) -> None:
    """The worker cannot see uncommitted jobs; the drain must not wait for them."""
    tasks = _registry(TaskDefinition("noop", lambda args: "ran", queue=Q))
    with psycopg.connect(dsn) as conn:
        bound = Client(conn=conn)
        bound.enqueue("noop", queue=Q)
        assert drain(bound, queue=Q, tasks=tasks, timeout_s=10) == []
        conn.commit()
        assert [o.result for o in drain(bound, queue=Q, tasks=tasks, timeout_s=10)] == ["ran"]
