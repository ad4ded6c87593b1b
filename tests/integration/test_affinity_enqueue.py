"""Affinity keys, producer side: what enqueue stores and what the job views show.

Contracts: ``affinity_key`` given to ``Client.enqueue`` (plain and keyed
statements), ``enqueue_many`` items (plain and keyed bulk statements, mixed
with items without one) and ``AsyncClient`` lands in ``jobs.affinity_key``;
``get``/``list`` return it; a bad key (empty, over 255 characters, not a
string) is one clear ``ValidationError`` line and writes nothing; the plain
bulk path sends no per-row values when no item has a key; ``queue-ctl enqueue
--affinity-key`` stores it, ``status``/``show`` print it, and a bad one exits 2
with a one-line error. The claim-side preference is tested with the worker.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest
from support.ctl import ok, queue_ctl
from support.jobs import count_jobs

from queue_engine import AsyncClient, Client
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer import operations as ops

Conn = psycopg.Connection[Any]
TOO_LONG = "m" * 256
BAD_KEYS: list[Any] = ["", TOO_LONG, 5, b"model", ["m"]]
KEY_MESSAGE = "affinity_key must be a non-empty string of at most 255 characters"


def stored_keys(conn: Conn, ids: list[int]) -> list[str | None]:
    rows = conn.execute(
        "SELECT id, affinity_key FROM queue_engine.jobs WHERE id = ANY(%s)", (ids,)
    ).fetchall()
    by_id = dict(rows)
    return [by_id[i] for i in ids]


def assert_one_line(exc: pytest.ExceptionInfo[ValidationError], prefix: str = "") -> None:
    message = str(exc.value)
    assert "\n" not in message
    assert message == f"{prefix}{KEY_MESSAGE}"


# --- Client ------------------------------------------------------------------------------


def test_enqueue_stores_the_affinity_key(client: Client, conn: Conn) -> None:
    job = client.enqueue("llm.generate", affinity_key="model:llama-3-8b")
    assert job.affinity_key == "model:llama-3-8b"
    assert stored_keys(conn, [job.id]) == ["model:llama-3-8b"]


def test_enqueue_without_affinity_key_stores_null(client: Client, conn: Conn) -> None:
    job = client.enqueue("llm.generate")
    assert job.affinity_key is None
    assert stored_keys(conn, [job.id]) == [None]


def test_keyed_enqueue_stores_the_affinity_key(client: Client, conn: Conn) -> None:
    """The conflict-resolving statement (idempotency/dedupe keys) binds it too."""
    first = client.enqueue("llm.generate", idempotency_key="req-1", affinity_key="model:a")
    assert first.created and first.affinity_key == "model:a"
    # The existing job comes back as it was stored, whatever the second call asked for.
    again = client.enqueue("llm.generate", idempotency_key="req-1", affinity_key="model:b")
    assert (again.id, again.created, again.affinity_key) == (first.id, False, "model:a")
    deduped = client.enqueue("llm.generate", dedupe_key="d-1", affinity_key="model:c")
    assert stored_keys(conn, [first.id, deduped.id]) == ["model:a", "model:c"]


def test_key_at_max_length_is_accepted(client: Client, conn: Conn) -> None:
    key = "k" * 255
    job = client.enqueue("llm.generate", affinity_key=key)
    assert stored_keys(conn, [job.id]) == [key]


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_enqueue_refuses_a_bad_key_in_one_line(client: Client, conn: Conn, bad: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        client.enqueue("llm.generate", affinity_key=bad)
    assert_one_line(exc)
    assert isinstance(exc.value, ValueError)
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
def test_enqueue_many_stores_affinity_keys_in_input_order(
    client: Client, conn: Conn, keyed: bool
) -> None:
    items: list[dict[str, Any]] = [
        {"task": "llm.generate", "affinity_key": "model:a"},
        {"task": "llm.generate"},
        {"task": "llm.generate", "affinity_key": "model:b"},
        {"task": "llm.generate", "affinity_key": None},
        {"task": "llm.generate", "affinity_key": "model:a"},
    ]
    if keyed:
        for n, item in enumerate(items):
            item["idempotency_key"] = f"req-{n}"
    ids = client.enqueue_many(items)
    assert stored_keys(conn, ids) == ["model:a", None, "model:b", None, "model:a"]


def test_enqueue_many_without_affinity_keys_sends_a_null_column() -> None:
    """The plain fast path: no per-row values for a column nobody set."""
    specs = ops.enqueue_many_specs([{"task": "t"}, {"task": "t", "lock_key": "l"}])
    statement = ops.enqueue_many_statement("queue_engine", specs)
    assert statement.params["affinity_key"] is None
    specs = ops.enqueue_many_specs([{"task": "t"}, {"task": "t", "affinity_key": "m"}])
    statement = ops.enqueue_many_statement("queue_engine", specs)
    assert statement.params["affinity_key"] == [None, "m"]


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_enqueue_many_refuses_a_bad_key_naming_the_item(
    client: Client, conn: Conn, bad: Any
) -> None:
    items = [{"task": "t", "affinity_key": "ok"}, {"task": "t", "affinity_key": bad}]
    with pytest.raises(ValidationError) as exc:
        client.enqueue_many(items)
    assert_one_line(exc, prefix="jobs[1]: ")
    assert count_jobs(conn) == 0


def test_misspelled_option_suggests_affinity_key(client: Client) -> None:
    with pytest.raises(ValidationError, match="did you mean 'affinity_key'"):
        client.enqueue_many([{"task": "t", "afinity_key": "m"}])


def test_get_and_list_return_the_affinity_key(client: Client) -> None:
    warm = client.enqueue("llm.generate", queue="gpu", affinity_key="model:a")
    cold = client.enqueue("llm.generate", queue="gpu")
    assert client.get(warm.id).affinity_key == "model:a"
    assert client.get(cold.id).affinity_key is None
    listed = {j.id: j.affinity_key for j in client.list(queue="gpu")}
    assert listed == {warm.id: "model:a", cold.id: None}
    assert client.get(warm.id).to_dict()["affinity_key"] == "model:a"


def test_plain_sql_insert_can_set_it_and_the_schema_holds_the_rule(
    client: Client, conn: Conn
) -> None:
    """Producers that insert rows themselves may set the column; the CHECK guards it."""
    job_id = conn.execute(
        "INSERT INTO queue_engine.jobs (task, affinity_key) VALUES ('t', 'model:a') RETURNING id"
    ).fetchone()[0]
    assert client.get(job_id).affinity_key == "model:a"
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO queue_engine.jobs (task, affinity_key) VALUES ('t', '')")


# --- AsyncClient -------------------------------------------------------------------------


def test_async_client_stores_and_returns_the_affinity_key(dsn: str, conn: Conn) -> None:
    async def body() -> tuple[int, int, list[int], str | None, list[str | None]]:
        async with AsyncClient(dsn) as client:
            plain = await client.enqueue("llm.generate", affinity_key="model:a")
            keyed = await client.enqueue(
                "llm.generate", idempotency_key="i", affinity_key="model:b"
            )
            ids = await client.enqueue_many(
                [{"task": "t", "affinity_key": "model:c"}, {"task": "t"}]
            )
            got = (await client.get(plain.id)).affinity_key
            listed = [j.affinity_key for j in await client.list(limit=2)]
            return plain.id, keyed.id, ids, got, listed

    plain_id, keyed_id, ids, got, listed = asyncio.run(body())
    assert stored_keys(conn, [plain_id, keyed_id, *ids]) == ["model:a", "model:b", "model:c", None]
    assert got == "model:a"
    assert listed == [None, "model:c"]  # newest first


@pytest.mark.parametrize("bad", ["", TOO_LONG, 7])
def test_async_client_refuses_a_bad_key(dsn: str, conn: Conn, bad: Any) -> None:
    async def body() -> None:
        async with AsyncClient(dsn) as client:
            await client.enqueue("t", affinity_key=bad)

    with pytest.raises(ValidationError) as exc:
        asyncio.run(body())
    assert_one_line(exc)
    assert count_jobs(conn) == 0


# --- queue-ctl ---------------------------------------------------------------------------


def field_lines(out: str) -> dict[str, str]:
    return dict(
        (part.strip() for part in line.split(":", 1)) for line in out.splitlines() if ":" in line
    )


def test_ctl_enqueue_with_affinity_key(dsn: str, conn: Conn) -> None:
    job_id = int(
        ok(queue_ctl("--dsn", dsn, "enqueue", "llm.generate", "--affinity-key", "model:a"))
    )
    assert stored_keys(conn, [job_id]) == ["model:a"]
    assert (
        field_lines(ok(queue_ctl("--dsn", dsn, "status", str(job_id))))["affinity_key"] == "model:a"
    )
    shown = ok(queue_ctl("--dsn", dsn, "show", str(job_id)))
    assert field_lines(shown.split("\n\n")[0])["affinity_key"] == "model:a"
    as_json = json.loads(ok(queue_ctl("--dsn", dsn, "show", str(job_id), "--json")))
    assert as_json["affinity_key"] == "model:a"
    created = json.loads(
        ok(queue_ctl("--dsn", dsn, "enqueue", "t", "--affinity-key", "model:b", "--json"))
    )
    assert created["affinity_key"] == "model:b"


def test_ctl_status_omits_an_unset_affinity_key(dsn: str) -> None:
    job_id = int(ok(queue_ctl("--dsn", dsn, "enqueue", "llm.generate")))
    assert "affinity_key" not in ok(queue_ctl("--dsn", dsn, "status", str(job_id)))


@pytest.mark.parametrize("bad", ["", TOO_LONG])
def test_ctl_enqueue_refuses_a_bad_affinity_key(dsn: str, conn: Conn, bad: str) -> None:
    result = queue_ctl("--dsn", dsn, "enqueue", "llm.generate", "--affinity-key", bad)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0] == f"queue-ctl: error: {KEY_MESSAGE}"
    assert result.stdout == ""
    assert count_jobs(conn) == 0
