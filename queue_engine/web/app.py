"""``create_app``: the ``queue-web`` ASGI application, the HTTP API and the dashboard.

The app is built from a :class:`~queue_engine.web.settings.WebSettings` and
holds one :class:`~queue_engine.web.state.WebState` in ``app.state.web``; its
lifespan opens the database pools (in the background, so ``/health`` answers
while the database is down) and closes them at shutdown. Layers: the web
package sits at the top, like the command line: it imports the core (the same
operations ``queue-ctl`` runs), and nothing in the core imports it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI

from queue_engine.foundation.logs import log_event
from queue_engine.foundation.version import __version__
from queue_engine.web import openapi, problems
from queue_engine.web.api import api_routes, build_router
from queue_engine.web.api import router as api_router
from queue_engine.web.csrf import csrf_middleware
from queue_engine.web.first_run import SignInLink
from queue_engine.web.limits import BodyLimit
from queue_engine.web.pages import mount_pages
from queue_engine.web.settings import WebSettings
from queue_engine.web.state import WebState

log = logging.getLogger("queue_engine.web")

API_DESCRIPTION = """\
The queue-engine HTTP API: create, inspect, cancel and retry jobs, start and
operate workflows, and operate queues, workers and schedules. Authenticate with `Authorization: Bearer <token>`
(scopes read, producer, operator). Errors are RFC 9457 `application/problem+json`.
`POST /api/v1/jobs/trigger`, `GET /api/v1/jobs/{id}/status` and
`POST /api/v1/jobs/{id}/cancel` keep the shape of HTTP-triggered ETL services.
"""


def compat_routers(settings: WebSettings) -> tuple[APIRouter, ...]:
    """The routers of the compatibility face ``settings.compat`` names (none when ``off``)."""
    if settings.compat == "dataloader":
        from queue_engine.web.compat.dataloader import router

        return (router,)
    return ()


def create_app(settings: WebSettings, *, sign_in_link: SignInLink | None = None) -> FastAPI:
    """Build the app: state, error handlers, CSRF check, the API and the pages.

    ``sign_in_link``: the first-run link ``queue-web`` made (see
    :mod:`queue_engine.web.first_run`); None when credentials are configured.
    """
    state = WebState(settings, sign_in_link=sign_in_link)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.open()
        try:
            yield
        finally:
            state.close()

    app = FastAPI(
        title="queue-engine",
        version=__version__,
        description=API_DESCRIPTION,
        lifespan=lifespan,
        # Swagger UI loads its scripts from a CDN into this origin, where the
        # dashboard's login cookie lives: only when asked for.
        docs_url="/docs" if settings.api_explorer else None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.web = state
    problems.install(app)
    app.middleware("http")(csrf_middleware)
    app.add_middleware(BodyLimit)
    extra = compat_routers(settings)
    app.state.api_routes = api_routes(extra=extra)
    app.include_router(build_router(extra=extra) if extra else api_router)
    mount_pages(app)
    openapi.install(app)
    log_event(log, logging.DEBUG, "web.app_created", schema=settings.schema)
    return app
