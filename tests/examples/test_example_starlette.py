"""examples/starlette_app: the job exists if and only if the request's writes commit.

The app runs with its lifespan (pool and AsyncClient opened and closed by
it) and is called through httpx's ASGI transport, in the test's event loop
(anyio's pytest plugin); the worker side runs through the kit's ``drain``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest

from queue_engine import AsyncClient
from queue_engine.testing import assert_enqueued_async, drain, refute_enqueued_async

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def http(
    dsn: str, monkeypatch: pytest.MonkeyPatch, load_example: Any
) -> AsyncIterator[httpx.AsyncClient]:
    monkeypatch.setenv("QUEUE_ENGINE_DSN", dsn)
    shop_app = load_example("starlette_app", "shop_app")
    load_example("starlette_app", "shop_tasks")
    app = shop_app.app
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://shop") as http:
            yield http


async def test_an_order_and_its_job_commit_together_and_the_worker_confirms_it(
    http: httpx.AsyncClient, async_client: AsyncClient
) -> None:
    created = await http.post(
        "/orders", json={"customer": "ada", "lines": [{"sku": "tea", "quantity": 2}]}
    )
    assert created.status_code == 201, created.text
    order_id, job_id = created.json()["order_id"], created.json()["job_id"]

    job = await assert_enqueued_async(
        async_client, task="shop.confirm_order", args={"order_id": order_id}
    )
    assert job.id == job_id and job.queue == "shop"
    assert (await http.get(f"/jobs/{job_id}")).json()["status"] == "queued"
    assert (await http.get(f"/orders/{order_id}")).json()["status"] == "new"

    [outcome] = drain(async_client, queue="shop")
    assert outcome.status == "succeeded", outcome.error
    shown = (await http.get(f"/jobs/{job_id}")).json()
    assert shown["status"] == "succeeded"
    assert shown["result"] == {"order_id": order_id, "status": "confirmed"}
    assert (await http.get(f"/orders/{order_id}")).json()["status"] == "confirmed"


async def test_a_rolled_back_request_leaves_no_job(
    http: httpx.AsyncClient, async_client: AsyncClient, conn: Any
) -> None:
    refused = await http.post(
        "/orders",
        json={
            "customer": "bob",
            "lines": [{"sku": "tea", "quantity": 1}, {"sku": "x", "quantity": 0}],
        },
    )
    assert refused.status_code == 422
    # The job was enqueued before the bad line; the rollback took it back.
    await refute_enqueued_async(async_client, task="shop.confirm_order", status=None)
    assert conn.execute("SELECT count(*) FROM shop_orders").fetchone() == (0,)
    assert drain(async_client, queue="shop") == []


async def test_an_unknown_job_or_order_is_404(http: httpx.AsyncClient) -> None:
    assert (await http.get("/jobs/999999")).status_code == 404
    assert (await http.get("/orders/999999")).status_code == 404


async def test_the_job_row_was_written_by_the_request_transaction(
    http: httpx.AsyncClient, dsn: str
) -> None:
    """The same transaction wrote the order and the job: their rows have one xmin."""
    order = (await http.post("/orders", json={"customer": "cy", "lines": []})).json()
    with psycopg.connect(dsn, autocommit=True) as c:
        order_xmin = c.execute(
            "SELECT xmin::text FROM shop_orders WHERE id = %s", (order["order_id"],)
        ).fetchone()
        job_xmin = c.execute(
            "SELECT xmin::text FROM queue_engine.jobs WHERE id = %s", (order["job_id"],)
        ).fetchone()
    assert order_xmin == job_xmin
