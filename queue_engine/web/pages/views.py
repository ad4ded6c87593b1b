"""The dashboard's pages and their live fragments (GET only; changes are in ``actions``).

Every page is server-rendered; the parts that move (overview figures, the
queues and workers tables, a job's facts and timeline) are also served alone
as fragments, which htmx swaps in when the event stream says the fleet
changed (``qe:fleet``). Fleet figures come from the shared aggregator's
snapshot, so neither a page nor a fragment of them runs a statement.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse

from queue_engine.foundation.errors import ValidationError
from queue_engine.operator import flow, stats
from queue_engine.scheduler import store as schedule_store
from queue_engine.web.pages import reads
from queue_engine.web.pages.context import Page, PageContext
from queue_engine.web.pages.render import progress_of

router = APIRouter(include_in_schema=False)

#: Seconds between keep-alive comments on an idle event stream (proxies drop silent ones).
KEEPALIVE_S = 15.0
#: An event stream ends after this long; the browser reconnects at once (a server
#: shutting down then never waits on an old stream).
STREAM_MAX_S = 300.0


def _html(ctx: PageContext, template: str, **values: Any) -> HTMLResponse:
    return HTMLResponse(ctx.render(template, **values))


# -- overview ---------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def overview(ctx: Page) -> HTMLResponse:
    """Per-queue depth, throughput, percentiles and the last hour's charts."""
    return _html(ctx, "overview.html", nav="overview", title="Overview")


@router.get("/fragments/overview", response_class=HTMLResponse)
def overview_fragment(ctx: Page) -> HTMLResponse:
    """The overview's live part."""
    return _html(ctx, "_overview.html")


# -- jobs -------------------------------------------------------------------------


@router.get("/jobs", response_class=HTMLResponse)
def jobs(request: Request, ctx: Page) -> HTMLResponse:
    """Filtered, keyset-paginated jobs, with a bulk-action preview when asked."""
    try:
        filters = reads.JobFilters.parse(request.query_params)
    except reads.FilterError as exc:
        return _html(
            ctx,
            "jobs.html",
            nav="jobs",
            title="Jobs",
            jobs=[],
            next_before=None,
            f=reads.JobFilters(),
            filter_error=str(exc),
            **_job_choices(ctx),
        )
    preview_action = request.query_params.get("preview")
    with ctx.connection() as conn:
        window = reads.search_window(conn, ctx.schema, filters)
        rows = reads.list_jobs(conn, ctx.schema, filters, window, limit=reads.PAGE_SIZE + 1)
        preview = None
        if ctx.can_operate and filters.any and preview_action in reads.BULK_STATUSES:
            preview = reads.bulk_preview(
                conn,
                ctx.schema,
                filters,
                preview_action,
                window,
                cap=ctx.state.settings.bulk_max,
            )
    page, more = rows[: reads.PAGE_SIZE], len(rows) > reads.PAGE_SIZE
    # A full page continues below its last row; a short filtered page searched
    # its whole window and offers the next one.
    next_before = page[-1].id if more else (window.floor if window.more_below else None)
    return _html(
        ctx,
        "jobs.html",
        nav="jobs",
        title="Jobs",
        jobs=page,
        f=filters,
        window=window,
        searched_all=not more and window.more_below,
        next_before=next_before,
        preview=preview,
        filter_error=None,
        **_job_choices(ctx),
    )


def _job_choices(ctx: PageContext) -> dict[str, Any]:
    return {"statuses": reads.STATUSES, "queue_names": [q.queue for q in ctx.snapshot.queues]}


@router.get("/jobs/go")
def jump(request: Request, ctx: Page) -> Response:
    """The jump-to-id box: straight to the job's page."""
    raw = (request.query_params.get("id") or "").strip().lstrip("#")
    if not raw.isdigit():
        return RedirectResponse(f"{ctx.prefix}/jobs", status_code=303)
    return RedirectResponse(f"{ctx.prefix}/jobs/{int(raw)}", status_code=303)


@router.get("/jobs/{job_id}", response_class=HTMLResponse)
def job(job_id: int, ctx: Page) -> HTMLResponse:
    """Args, result, error with traceback, progress and the event timeline of one job."""
    values = _job_values(ctx, job_id)
    if values is None:
        return _not_found(ctx, job_id)
    return _html(ctx, "job.html", nav="jobs", title=f"Job {job_id}", **values)


@router.get("/fragments/jobs/{job_id}", response_class=HTMLResponse)
def job_fragment(job_id: int, ctx: Page) -> HTMLResponse:
    """A job's live part: facts, progress and timeline."""
    values = _job_values(ctx, job_id)
    if values is None:
        return _not_found(ctx, job_id)
    return _html(ctx, "_job.html", oob=True, **values)


def _job_values(ctx: PageContext, job_id: int) -> dict[str, Any] | None:
    with ctx.connection() as conn:
        found = reads.get_job(conn, ctx.schema, job_id)
        if found is None:
            return None
        events = stats.job_events(conn, ctx.schema, job_id)
    keys = [
        (label, value)
        for label, value in (
            ("Idempotency key", found.idempotency_key),
            ("Dedupe key", found.dedupe_key),
            ("Lock key", found.lock_key),
            ("Partition key", found.partition_key),
            ("Affinity key", found.affinity_key),
        )
        if value is not None
    ]
    return {"job": found, "events": events, "keys": keys, "progress": progress_of(found.progress)}


def _not_found(ctx: PageContext, job_id: int) -> HTMLResponse:
    body = ctx.render(
        "not_found.html",
        nav="jobs",
        title=f"Job {job_id} not found",
        detail="No job has this id: it was never enqueued, or retention pruned it.",
        back=f"{ctx.prefix}/jobs",
    )
    return HTMLResponse(body, status_code=404)


# -- queues, workers, schedules ---------------------------------------------------


@router.get("/queues", response_class=HTMLResponse)
def queues(request: Request, ctx: Page) -> HTMLResponse:
    """Every queue with its controls, and one queue's top partitions (``?partitions=Q``).

    The panel shows one queue per view (by default the one with most queued
    jobs), so a page view costs one bounded read (:func:`flow.top_partitions`),
    however many queues there are.
    """
    names = [q.queue for q in sorted(ctx.snapshot.queues, key=lambda q: -q.queued)]
    chosen = request.query_params.get("partitions") or (names[0] if names else None)
    parts: list[flow.PartitionFlow] = []
    refused = None
    if chosen is not None:
        try:
            with ctx.connection() as conn:
                parts = flow.top_partitions(conn, ctx.schema, chosen)
        except ValidationError as exc:
            refused, chosen = str(exc), None
    with ctx.connection() as conn:
        changes = reads.recent_changes(conn, ctx.schema)
    return _html(
        ctx,
        "queues.html",
        nav="queues",
        title="Queues",
        partitions=parts,
        partitions_queue=chosen,
        partitions_refused=refused,
        queue_names=sorted(names),
        recent_changes=changes,
    )


@router.get("/fragments/queues", response_class=HTMLResponse)
def queues_fragment(ctx: Page) -> HTMLResponse:
    """The queues table alone."""
    return _html(ctx, "_queues.html")


def _worker_values(request: Request, ctx: PageContext) -> dict[str, Any]:
    show_all = request.query_params.get("all") == "1"
    rows = list(ctx.snapshot.workers)
    shown = rows if show_all else [w for w in rows if w.liveness != "stopped"]
    return {"workers": shown, "hidden_stopped": len(rows) - len(shown)}


@router.get("/workers", response_class=HTMLResponse)
def workers(request: Request, ctx: Page) -> HTMLResponse:
    """Every process of the fleet, its heartbeat and host telemetry."""
    return _html(
        ctx, "workers.html", nav="workers", title="Workers", **_worker_values(request, ctx)
    )


@router.get("/fragments/workers", response_class=HTMLResponse)
def workers_fragment(request: Request, ctx: Page) -> HTMLResponse:
    """The workers table alone."""
    return _html(ctx, "_workers.html", **_worker_values(request, ctx))


@router.get("/schedules", response_class=HTMLResponse)
def schedules(ctx: Page) -> HTMLResponse:
    """Every schedule with its next fire time and last slot."""
    now = ctx.now()
    with ctx.connection() as conn:
        rows, broken = schedule_store.list_rows(conn, ctx.schema)
    described = []
    for row in rows:
        spec = row.spec
        described.append(
            {
                "name": spec.name,
                "expression": spec.expression,
                "tz": spec.tz,
                "task": spec.task,
                "queue": spec.queue,
                "enabled": spec.enabled,
                "source": spec.source,
                "next_fire": row.next_fire(now) if spec.enabled else None,
                "last_slot": row.last_slot,
                "last_job_id": row.last_job_id,
            }
        )
    return _html(
        ctx,
        "schedules.html",
        nav="schedules",
        title="Schedules",
        schedules=described,
        broken=broken,
    )


# -- the event stream -------------------------------------------------------------


@router.get("/events")
async def events(request: Request, ctx: Page) -> StreamingResponse:
    """Server-Sent Events: one ``fleet`` event per new snapshot of the shared aggregator."""
    aggregator = ctx.aggregator
    hub = aggregator.broadcaster

    async def stream() -> AsyncIterator[str]:
        sub = hub.subscribe()
        loop = asyncio.get_running_loop()
        ends = loop.time() + STREAM_MAX_S
        try:
            if aggregator.stopping:
                return
            yield "retry: 2000\n\n"
            yield _event(aggregator.snapshot.event())
            while not sub.closed and not aggregator.stopping and loop.time() < ends:
                try:
                    await asyncio.wait_for(sub.changed.wait(), timeout=KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                sub.changed.clear()
                if sub.closed or await request.is_disconnected():
                    break
                yield _event(aggregator.snapshot.event())
        finally:
            hub.unsubscribe(sub)

    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)


def _event(data: dict[str, Any]) -> str:
    return f"event: fleet\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
