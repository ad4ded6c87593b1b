"""The OpenAPI document, with what FastAPI cannot see: scopes and security schemes.

FastAPI builds the document from the routes; this module adds the scope each
operation needs (``x-required-scope``, read from the route's
:func:`~queue_engine.web.auth.require_scope` dependency) and the two security
schemes, and serves the result at ``/openapi.json``.
:mod:`queue_engine.web.apidoc` renders it as docs/reference/http-api.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "QUEUE_ENGINE_WEB_TOKENS"},
    "basic": {"type": "http", "scheme": "basic", "description": "QUEUE_ENGINE_WEB_USERS"},
}
HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def required_scope(route: APIRoute) -> str | None:
    """``read``, ``producer`` or ``operator``: the scope the route's dependency asks for."""
    for dependency in route.dependant.dependencies:
        name = getattr(dependency.call, "__name__", "")
        if name.startswith("require_"):
            return name.removeprefix("require_")
    return None


def api_routes() -> list[APIRoute]:
    """Every route of the HTTP API, from its routers (their routes carry full paths)."""
    from queue_engine.web.api import ROUTERS

    return [r for router in ROUTERS for r in router.routes if isinstance(r, APIRoute)]


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with scopes and security schemes (cached on the app)."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    doc.setdefault("components", {})["securitySchemes"] = SCHEMES
    for route in api_routes():
        scope = required_scope(route)
        for method in route.methods or ():
            operation = doc["paths"].get(route.path, {}).get(method.lower())
            if operation is None:
                continue
            operation["x-required-scope"] = scope or "none"
            operation["security"] = [{"bearer": []}, {"basic": []}] if scope else []
    app.openapi_schema = doc
    return doc


def install(app: FastAPI) -> None:
    """Serve the extended document at ``/openapi.json``."""
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
