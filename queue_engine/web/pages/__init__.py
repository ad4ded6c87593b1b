"""The dashboard: server-rendered pages, live fragments, the event stream, the buttons.

:func:`mount_pages` adds to the app built by
:func:`queue_engine.web.app.create_app`: the vendored static files (htmx,
the stylesheet, a little plain JS), the Jinja2 environment, the one shared
:class:`~queue_engine.web.live.Aggregator` of the process (started with the
app, stopped with it), the sign-in page (and the browser's 401, :mod:`.login`),
the pages (:mod:`.views`), the actions (:mod:`.actions`) and the Limits
page with its forms (:mod:`.limits`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from importlib import resources
from typing import Any, cast

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from queue_engine.foundation.db import connect
from queue_engine.web import live
from queue_engine.web.pages import actions, limits, login, views, workflows
from queue_engine.web.pages.render import environment
from queue_engine.web.state import WebState


def make_aggregator(state: WebState) -> live.Aggregator:
    """The process's aggregator, on the read-only (monitor role) DSN when one is configured."""
    settings = state.settings
    dsn = settings.read_dsn or settings.dsn

    def open_connection() -> Any:
        return connect(dsn, application_name="queue-web-live")

    return live.Aggregator(open_connection, settings.schema)


def end_event_streams(app: FastAPI) -> None:
    """End the dashboard's open event streams (called by ``queue-web`` on its first SIGTERM)."""
    aggregator = getattr(app.state, "live", None)
    if isinstance(aggregator, live.Aggregator):
        aggregator.end_streams()


def mount_pages(app: FastAPI) -> None:
    """Mount the dashboard on ``app`` and tie its aggregator to the app's lifespan."""
    state: WebState = app.state.web
    aggregator = make_aggregator(state)
    app.state.live = aggregator
    app.state.page_templates = environment()
    static = resources.files("queue_engine.web").joinpath("static")
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    app.include_router(login.router)
    login.install(app)  # a browser's 401 is the sign-in page
    app.include_router(views.router)
    app.include_router(workflows.router)
    app.include_router(actions.router)
    app.include_router(limits.router)

    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with cast(AbstractAsyncContextManager[Any], inner(a)) as value:
            aggregator.start()
            try:
                yield value
            finally:
                aggregator.stop()

    app.router.lifespan_context = lifespan
