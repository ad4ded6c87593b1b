"""The dashboard's buttons: cancel, retry, bulk, pause, resume, scale, rate, park, stop, schedules, workflows.

Every action is a plain HTML form POST answered by a 303 redirect back to
the page it came from, with a one-line banner (``?done=`` or ``?failed=``):
it works without JavaScript, a reload never repeats it, and the browser's
back button behaves. Each calls the very function ``queue-ctl`` calls
(:class:`~queue_engine.Client` for jobs, :mod:`queue_engine.operator.controls`,
:mod:`queue_engine.scheduler.store`), on a connection of the operator's pool.

Protection: the operator scope (:func:`~.context.operator_context`) and the
app's CSRF middleware (:mod:`queue_engine.web.csrf`), which refuses a
cross-site form post before any of this runs. Forms are parsed here from the
urlencoded body, so the dashboard needs no multipart library.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from queue_engine.foundation.errors import QueueEngineError
from queue_engine.operator import controls
from queue_engine.producer.client import Client
from queue_engine.scheduler import store as schedule_store
from queue_engine.web.pages import reads
from queue_engine.web.pages.context import Operator, PageContext

router = APIRouter(include_in_schema=False)

#: Longest form body an action reads (bytes): the forms are a few fields.
MAX_FORM_BYTES = 16 * 1024


async def form_of(request: Request) -> dict[str, str]:
    """The urlencoded form fields of a POST (the last value of a repeated field wins)."""
    body = await request.body()
    return dict(parse_qsl(body[:MAX_FORM_BYTES].decode("utf-8", "replace"), keep_blank_values=True))


def _back(
    ctx: PageContext,
    path: str,
    *,
    done: str | None = None,
    failed: str | None = None,
    query: str = "",
) -> RedirectResponse:
    params = [("done", done)] if done else [("failed", failed or "")]
    sep = "&" if query else ""
    return RedirectResponse(f"{ctx.prefix}{path}?{query}{sep}{urlencode(params)}", status_code=303)


async def _run(
    ctx: PageContext, path: str, work: Callable[[Any], str], query: str = ""
) -> RedirectResponse:
    """Run ``work(conn)`` in the thread pool; its text, or the refusal, becomes the banner."""

    def call() -> str:
        with ctx.connection() as conn:
            return work(conn)

    try:
        message = await run_in_threadpool(call)
    except QueueEngineError as exc:
        return _back(ctx, path, failed=str(exc).splitlines()[0], query=query)
    return _back(ctx, path, done=message, query=query)


def _client(ctx: PageContext, conn: Any) -> Client:
    return Client(ctx.state.settings.dsn, conn=conn, schema=ctx.schema)


# -- workflows --------------------------------------------------------------------


@router.post("/actions/workflows/{workflow_id}/cancel")
async def cancel_workflow(workflow_id: int, ctx: Operator) -> RedirectResponse:
    """Cancel every unfinished node of a workflow; running ones are asked to stop."""
    who = f"workflow canceled from the dashboard by {ctx.principal.name}"

    def work(conn: Any) -> str:
        canceled, stopping = _client(ctx, conn).cancel_workflow(workflow_id, message=who)
        return f"workflow {workflow_id}: {canceled} node(s) canceled, {stopping} asked to stop"

    return await _run(ctx, f"/workflows/{workflow_id}", work)


@router.post("/actions/workflows/{workflow_id}/retry")
async def retry_workflow(workflow_id: int, ctx: Operator) -> RedirectResponse:
    """Re-run an ended workflow's failed, canceled and lost nodes and their descendants."""
    who = f"workflow retried from the dashboard by {ctx.principal.name}"

    def work(conn: Any) -> str:
        rerun = _client(ctx, conn).retry_workflow(workflow_id, message=who)
        return f"workflow {workflow_id}: {rerun} node(s) run again"

    return await _run(ctx, f"/workflows/{workflow_id}", work)


@router.post("/actions/workflows/{workflow_id}/provide-input")
async def provide_input(workflow_id: int, request: Request, ctx: Operator) -> RedirectResponse:
    """Give an input node its value: the form's ``value`` as JSON (empty: null)."""
    form = await form_of(request)
    node, raw = form.get("node", "").strip(), form.get("value", "").strip()
    path = f"/workflows/{workflow_id}"
    try:
        value = json.loads(raw) if raw else None
    except json.JSONDecodeError as exc:
        return _back(ctx, path, failed=f"value: not valid JSON ({exc.msg} at position {exc.pos})")

    def work(conn: Any) -> str:
        if _client(ctx, conn).provide_input(workflow_id, node, value):
            return f"input {node} of workflow {workflow_id} provided"
        return f"input {node} of workflow {workflow_id} had been provided already"

    return await _run(ctx, path, work)


# -- jobs -------------------------------------------------------------------------


@router.post("/actions/jobs/{job_id}/cancel")
async def cancel_job(job_id: int, ctx: Operator) -> RedirectResponse:
    """Cancel a queued job, or ask a running one to stop."""
    who = f"canceled from the dashboard by {ctx.principal.name}"

    def work(conn: Any) -> str:
        job = _client(ctx, conn).cancel(job_id, message=who)
        return f"job {job_id}: " + ("cancel requested" if job.status == "running" else job.status)

    return await _run(ctx, f"/jobs/{job_id}", work)


@router.post("/actions/jobs/{job_id}/retry")
async def retry_job(job_id: int, ctx: Operator) -> RedirectResponse:
    """Put a failed, canceled or lost job back in its queue."""
    who = f"retried from the dashboard by {ctx.principal.name}"

    def work(conn: Any) -> str:
        _client(ctx, conn).retry(job_id, message=who)
        return f"job {job_id} queued again"

    return await _run(ctx, f"/jobs/{job_id}", work)


@router.post("/actions/jobs/bulk")
async def bulk(request: Request, ctx: Operator) -> RedirectResponse:
    """Cancel or retry every job matching the filters (at most the cap), one by one."""
    form = await form_of(request)
    action = form.get("action", "")
    try:
        filters = reads.JobFilters.parse(form)
    except reads.FilterError as exc:
        return _back(ctx, "/jobs", failed=str(exc))
    if not filters.any or action not in reads.BULK_STATUSES:
        return _back(ctx, "/jobs", failed="a bulk action needs a filter and an action")
    cap = ctx.state.settings.bulk_max
    who = f"{action} (bulk) from the dashboard by {ctx.principal.name}"

    def work(conn: Any) -> str:
        client = _client(ctx, conn)
        done = refused = 0
        window = reads.search_window(conn, ctx.schema, filters)
        for job_id in reads.bulk_ids(conn, ctx.schema, filters, action, window, limit=cap):
            try:
                if action == "cancel":
                    client.cancel(job_id, message=who)
                else:
                    client.retry(job_id, message=who)
                done += 1
            except QueueEngineError:
                refused += 1  # changed status since the preview: skipped, counted
        note = f" ({refused} had changed and were skipped)" if refused else ""
        return f"{action}: {done} job(s){note}"

    return await _run(ctx, "/jobs", work, query=filters.query)


# -- queues -----------------------------------------------------------------------


@router.post("/actions/queues/{queue}/pause")
async def pause(queue: str, ctx: Operator) -> RedirectResponse:
    """Pause a queue: its workers claim nothing; running jobs finish."""

    def work(conn: Any) -> str:
        controls.pause_queue(conn, ctx.schema, queue, by=ctx.actor)
        return f"queue {queue} paused"

    return await _run(ctx, "/queues", work)


@router.post("/actions/queues/{queue}/resume")
async def resume(queue: str, ctx: Operator) -> RedirectResponse:
    """Resume a paused queue."""

    def work(conn: Any) -> str:
        controls.resume_queue(conn, ctx.schema, queue, by=ctx.actor)
        return f"queue {queue} resumed"

    return await _run(ctx, "/queues", work)


@router.post("/actions/queues/{queue}/scale")
async def scale(queue: str, request: Request, ctx: Operator) -> RedirectResponse:
    """At most N workers of the queue claim (empty: no limit)."""
    limit = (await form_of(request)).get("limit", "").strip() or "off"

    def work(conn: Any) -> str:
        result = controls.scale_queue(conn, ctx.schema, queue, limit, by=ctx.actor)
        shown = "no limit" if result.limit is None else f"at most {result.limit} worker(s)"
        return f"queue {queue}: {shown} claim"

    return await _run(ctx, "/queues", work)


@router.post("/actions/queues/{queue}/rate")
async def rate(queue: str, request: Request, ctx: Operator) -> RedirectResponse:
    """At most R jobs started per second (empty: no limit)."""
    value = (await form_of(request)).get("rate", "").strip() or "off"

    def work(conn: Any) -> str:
        result = controls.rate_queue(conn, ctx.schema, queue, value, by=ctx.actor)
        shown = "no rate limit" if result.rate is None else f"at most {result.rate:g} job(s)/s"
        return f"queue {queue}: {shown}"

    return await _run(ctx, "/queues", work)


# -- workers ----------------------------------------------------------------------


def _worker_action(kind: str) -> Callable[..., Any]:
    async def action(request: Request, ctx: Operator) -> RedirectResponse:
        form = await form_of(request)
        worker_id = form.get("worker_id", "").strip()
        now = form.get("now", "") == "1"

        def work(conn: Any) -> str:
            target = controls.FleetTarget(worker_id=worker_id)
            if kind == "park":
                controls.park(conn, ctx.schema, target, by=ctx.actor)
                return f"worker {worker_id} parked: it claims nothing until unparked"
            if kind == "unpark":
                controls.unpark(conn, ctx.schema, target, by=ctx.actor)
                return f"worker {worker_id} unparked"
            controls.stop_workers(conn, ctx.schema, target, now=now, by=ctx.actor)
            if now:
                return f"worker {worker_id} gives its running job back and stops now"
            return f"worker {worker_id} stops after its current job"

        return await _run(ctx, "/workers", work)

    action.__name__ = f"{kind}_worker"
    action.__doc__ = f"{kind.capitalize()} one worker (by id)."
    return action


for _kind in ("park", "unpark", "stop"):
    router.add_api_route(f"/actions/workers/{_kind}", _worker_action(_kind), methods=["POST"])


# -- schedules --------------------------------------------------------------------


@router.post("/actions/schedules/{name}/{verb}")
async def schedule(name: str, verb: str, ctx: Operator) -> RedirectResponse:
    """Enable, disable or run a schedule now."""

    def work(conn: Any) -> str:
        if verb in ("enable", "disable"):
            schedule_store.set_enabled(conn, ctx.schema, name, verb == "enable")
            return f"schedule {name} {verb}d"
        if verb == "run-now":
            job_id = schedule_store.run_now(conn, ctx.schema, name, producer="queue-web")
            return f"schedule {name}: job {job_id} enqueued"
        return f"unknown action {quote(verb)}"

    return await _run(ctx, "/schedules", work)
