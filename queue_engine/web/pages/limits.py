"""The dashboard's Limits page (``/limits``) and its set and clear forms.

The page lists concurrency keys, busiest first: those with an operator's
limit and those with running jobs, with a running/limit bar, the jobs
waiting on the limit and when the limit was set (:mod:`queue_engine.operator.flow`,
one bounded statement per view). The forms call the functions behind
``queue-ctl limits set|clear`` and ``PUT|DELETE /api/v1/limits/{key}``, with
the protections of every dashboard action (:mod:`.actions`: operator scope,
CSRF, a 303 back with a banner), recorded in the audit of controls with the
visitor's name (:mod:`queue_engine.operator.audit`); the page lists the last
changes ("Recent changes"). The key travels
in the form body, not the path, since a key may hold ``/``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from queue_engine.operator import flow, limits
from queue_engine.web.pages import reads
from queue_engine.web.pages.actions import _run, form_of
from queue_engine.web.pages.context import Operator, Page

router = APIRouter(include_in_schema=False)

#: Keys the page lists, busiest first.
PAGE_KEYS = 100


@router.get("/limits", response_class=HTMLResponse)
def limits_page(ctx: Page) -> HTMLResponse:
    """Per-key limits: running against the limit, jobs waiting on it, when it was set."""
    with ctx.connection() as conn:
        rows = flow.key_flows(conn, ctx.schema, limit=PAGE_KEYS)
        changes = reads.recent_changes(conn, ctx.schema)
    return HTMLResponse(
        ctx.render(
            "limits.html",
            nav="limits",
            title="Limits",
            keys=rows,
            shown_max=PAGE_KEYS,
            limit_max=limits.LIMIT_RANGE[1],
            recent_changes=changes,
        )
    )


@router.post("/actions/limits/set")
async def set_limit(request: Request, ctx: Operator) -> RedirectResponse:
    """At most N jobs of the key run at once (0: none starts)."""
    form = await form_of(request)
    key, value = form.get("key", ""), form.get("max_running", "").strip()

    def work(conn: Any) -> str:
        result = limits.set_limit(conn, ctx.schema, key, value, by=ctx.actor)
        was = "none" if result.previous is None else str(result.previous)
        return f"key {result.key}: at most {result.max_running} running (was {was})"

    return await _run(ctx, "/limits", work)


@router.post("/actions/limits/clear")
async def clear_limit(request: Request, ctx: Operator) -> RedirectResponse:
    """Remove the key's limit: its jobs follow their own concurrency_limit."""
    key = (await form_of(request)).get("key", "")

    def work(conn: Any) -> str:
        removed = limits.clear_limit(conn, ctx.schema, key, by=ctx.actor)
        if removed is None:
            raise limits.LimitNotFound(key)
        return f"key {key}: limit {removed} removed; its jobs follow their own limit"

    return await _run(ctx, "/limits", work)
