"""A Starlette app that runs its workers beside itself: ``WorkerProcesses`` in its lifespan.

``uvicorn beside_app:app`` starts two ``queue-claim-worker --queue=wt --app
qe_worker_tasks`` processes when the app starts and stops them when it stops
(tests/process/test_worker_processes.py). ``POST /jobs`` enqueues an
``echo`` job; ``GET /jobs/{id}`` reads it back; ``GET /workers`` lists the
pids of the worker processes the app runs now.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from queue_engine import AsyncClient, WorkerProcesses

WORKERS = int(os.environ.get("BESIDE_WORKERS", "2"))


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """The workers start with the app and stop with it; the client serves the routes."""
    async with (
        WorkerProcesses({"wt": WORKERS}, app="qe_worker_tasks") as workers,
        AsyncClient() as jobs,
    ):
        app.state.workers = workers
        app.state.jobs = jobs
        yield


async def enqueue(request: Request) -> JSONResponse:
    """Enqueue one ``echo`` job with the request's body as its args."""
    job = await request.app.state.jobs.enqueue("echo", queue="wt", args=await request.json())
    return JSONResponse({"id": job.id}, status_code=201)


async def get_job(request: Request) -> JSONResponse:
    """The job's status and result."""
    job = await request.app.state.jobs.get(int(request.path_params["job_id"]))
    return JSONResponse({"id": job.id, "status": str(job.status), "result": job.result})


async def workers(request: Request) -> JSONResponse:
    """The pids of the worker processes running beside the app."""
    return JSONResponse({"pids": request.app.state.workers.pids})


app = Starlette(
    routes=[
        Route("/jobs", enqueue, methods=["POST"]),
        Route("/jobs/{job_id:int}", get_job),
        Route("/workers", workers),
    ],
    lifespan=lifespan,
)
