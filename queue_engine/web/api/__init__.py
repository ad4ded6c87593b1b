"""The HTTP API: health and info at the root, everything else under ``/api/v1``."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.routing import APIRoute

from queue_engine.web.api import (
    audit,
    bulk,
    fleet,
    health,
    jobs,
    limits,
    problems_page,
    schedules,
    workflows,
)

#: The API's routers, in matching order (bulk before jobs: its fixed paths must
#: win over the jobs routes' patterns). Their routes carry full paths.
ROUTERS = (
    health.router,
    bulk.router,
    jobs.router,
    fleet.router,
    limits.router,
    audit.router,
    schedules.router,
    workflows.router,
)

#: A route's key: its path and one of its methods.
RouteKey = tuple[str, str]


def keys(route: APIRoute) -> set[RouteKey]:
    """The (path, method) pairs a route serves."""
    return {(route.path, method) for method in route.methods or ()}


def api_routes(*, extra: tuple[APIRouter, ...] = ()) -> list[APIRoute]:
    """The operations of the API: ``extra``'s routes, then the native ones they leave.

    ``extra``: a compatibility face's routers, whose routes replace the native
    ones of the same path and method (:mod:`queue_engine.web.compat`).
    """
    added = [r for sub in extra for r in sub.routes if isinstance(r, APIRoute)]
    taken = set().union(*(keys(r) for r in added))
    native = [
        r for sub in ROUTERS for r in sub.routes if isinstance(r, APIRoute) and not keys(r) & taken
    ]
    return added + native


def build_router(*, extra: tuple[APIRouter, ...] = ()) -> APIRouter:
    """The API's router: :func:`api_routes`, and the problems page."""
    out = APIRouter()
    for route in api_routes(extra=extra):
        out.routes.append(route)
    #: Not an operation of the API: the page its errors' ``type`` links lead to.
    out.include_router(problems_page.router)
    return out


router = build_router()
