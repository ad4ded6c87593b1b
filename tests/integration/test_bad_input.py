"""Bad input never reaches the server: a NUL character in args is refused on every enqueue path.

Postgres ``jsonb`` cannot store ``\\u0000``; before validation refused it, the
server did, with a raw ``psycopg.errors.UntranslatableCharacter`` from
``Client.enqueue`` and a four-line error and exit 70 from ``queue-ctl
enqueue``. Every path must now raise a one-line :class:`ValidationError`
naming where the NUL is, and write nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from support.jobs import count_jobs

from queue_engine import AsyncClient, Client
from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.schedules import ScheduleSpec
from queue_engine.scheduler import store as schedule_store

Conn = psycopg.Connection[Any]
NUL_ARGS = [{"a": "x\u0000y"}, {"x\u0000y": 1}, {"outer": {"inner": ["ok", "\u0000"]}}]


@pytest.mark.parametrize("args", NUL_ARGS)
def test_client_enqueue_refuses_a_nul(client: Client, conn: Conn, args: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="NUL character"):
        client.enqueue("t.x", args=args)
    with pytest.raises(ValidationError, match=r"^jobs\[1\]: args contain a NUL"):
        client.enqueue_many([{"task": "t.x"}, {"task": "t.x", "args": args}])
    assert count_jobs(conn) == 0


def test_client_enqueue_on_the_callers_connection_refuses_a_nul(dsn: str, client: Client) -> None:
    with psycopg.connect(dsn) as own:
        with pytest.raises(ValidationError, match="NUL character"):
            client.enqueue("t.x", args={"a": "\u0000"}, conn=own)
        # Refused before anything was sent: the caller's transaction is intact.
        assert own.execute("SELECT 1").fetchone() == (1,)


def test_client_refuses_a_nul_in_a_key(client: Client, conn: Conn) -> None:
    with pytest.raises(ValidationError, match="idempotency_key contains a NUL"):
        client.enqueue("t.x", idempotency_key="k\u0000")
    assert count_jobs(conn) == 0


@pytest.mark.parametrize("args", NUL_ARGS)
def test_async_client_refuses_a_nul(dsn: str, conn: Conn, args: dict[str, Any]) -> None:
    async def main() -> None:
        async with AsyncClient(dsn) as client:
            with pytest.raises(ValidationError, match="NUL character"):
                await client.enqueue("t.x", args=args)
            with pytest.raises(ValidationError, match=r"^jobs\[0\]: args contain a NUL"):
                await client.enqueue_many([{"task": "t.x", "args": args}])

    asyncio.run(main())
    assert count_jobs(conn) == 0


def test_a_schedule_with_a_nul_in_its_args_is_refused(conn: Conn) -> None:
    with pytest.raises(ValidationError, match=r"^schedule 'nul': args contain a NUL"):
        ScheduleSpec(name="nul", expression="every 1m", task="t.x", args={"a": "\u0000"})
    assert schedule_store.list_rows(conn, "queue_engine")[0] == []
