"""A Starlette app that enqueues in the request's own transaction.

``POST /orders`` writes an order and its lines and enqueues the job that
confirms it, all on one connection inside one transaction: the job exists if
and only if the order does. A line with a quantity of 0 breaks a CHECK
constraint after the job was enqueued; the transaction rolls back and takes
the job with it, so no worker ever confirms an order that was never stored.

The lifespan opens what the app shares between requests and closes it on
shutdown: a psycopg pool for the app's own writes, and one
:class:`~queue_engine.AsyncClient` (its pool serves ``GET /jobs/{id}``; an
enqueue passes ``conn=`` to run on the request's connection instead).

Run it (the worker side is ``shop_tasks``; see README.md)::

    QUEUE_ENGINE_DSN=postgresql://... uvicorn shop_app:app
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from queue_engine import AsyncClient, JobNotFound

#: The queue and task the worker side (shop_tasks.py) serves.
QUEUE = "shop"
CONFIRM_TASK = "shop.confirm_order"

SCHEMA = """
CREATE TABLE IF NOT EXISTS shop_orders (
    id bigserial PRIMARY KEY,
    customer text NOT NULL,
    status text NOT NULL DEFAULT 'new',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS shop_order_lines (
    order_id bigint NOT NULL REFERENCES shop_orders (id),
    sku text NOT NULL,
    quantity int NOT NULL CHECK (quantity > 0)
);
"""


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Open the app's pool and queue client at start-up; close both at shutdown."""
    dsn = os.environ.get("QUEUE_ENGINE_DSN", "")
    async with AsyncConnectionPool(dsn, min_size=1, max_size=10, open=False) as pool:
        async with pool.connection() as conn:
            await conn.execute(SCHEMA)  # a real app runs its migrations instead
        async with AsyncClient(dsn) as jobs:
            app.state.pool = pool
            app.state.jobs = jobs
            yield


async def create_order(request: Request) -> JSONResponse:
    """Store an order and enqueue its confirmation in one transaction."""
    body = await request.json()
    pool: AsyncConnectionPool = request.app.state.pool
    jobs: AsyncClient = request.app.state.jobs
    async with pool.connection() as conn:
        try:
            async with conn.transaction():
                cur = await conn.execute(
                    "INSERT INTO shop_orders (customer) VALUES (%s) RETURNING id",
                    (body["customer"],),
                )
                row = await cur.fetchone()
                assert row is not None
                order_id = row[0]
                # On the request's connection: part of this transaction.
                job = await jobs.enqueue(
                    CONFIRM_TASK, queue=QUEUE, args={"order_id": order_id}, conn=conn
                )
                for line in body["lines"]:
                    await conn.execute(
                        "INSERT INTO shop_order_lines (order_id, sku, quantity) VALUES (%s, %s, %s)",
                        (order_id, line["sku"], line["quantity"]),
                    )
        except psycopg.errors.CheckViolation:
            # Rolled back: the order, its lines and the job are all gone.
            return JSONResponse({"error": "every quantity must be at least 1"}, status_code=422)
    return JSONResponse({"order_id": order_id, "job_id": job.id}, status_code=201)


async def get_order(request: Request) -> JSONResponse:
    """The order's status: ``new`` until the worker confirms it."""
    pool: AsyncConnectionPool = request.app.state.pool
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT id, customer, status FROM shop_orders WHERE id = %s",
            (int(request.path_params["order_id"]),),
        )
        row = await cur.fetchone()
    if row is None:
        return JSONResponse({"error": "no such order"}, status_code=404)
    return JSONResponse({"id": row[0], "customer": row[1], "status": row[2]})


async def get_job(request: Request) -> JSONResponse:
    """A job's status, for a page or a client that polls."""
    jobs: AsyncClient = request.app.state.jobs
    try:
        job = await jobs.get(int(request.path_params["job_id"]))
    except JobNotFound:
        return JSONResponse({"error": "no such job"}, status_code=404)
    body: dict[str, Any] = {
        "id": job.id,
        "task": job.task,
        "status": str(job.status),
        "attempt": job.attempt,
        "progress": job.progress,
        "result": job.result,
        "error": job.error,
    }
    return JSONResponse(body)


app = Starlette(
    routes=[
        Route("/orders", create_order, methods=["POST"]),
        Route("/orders/{order_id:int}", get_order),
        Route("/jobs/{job_id:int}", get_job),
    ],
    lifespan=lifespan,
)
