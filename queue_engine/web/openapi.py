"""The OpenAPI document, with what FastAPI cannot see: scopes, security, errors, JSON text.

FastAPI builds the document from the routes; this module completes it so that
it says exactly what the server accepts and answers:

- the scope each operation needs (``x-required-scope``, read from the route's
  :func:`~queue_engine.web.auth.require_scope` dependency) and the two
  security schemes;
- every error an operation can answer, each as ``application/problem+json``
  (:data:`PROBLEM_SCHEMA`): 401/403 where a credential is needed, 422 where it
  takes parameters or a body, 400/413/415 where it takes a body, 503 where it
  uses the database, and the 404/409 its route declares; FastAPI's own 422
  body (``HTTPValidationError``), which this server never sends, is gone;
- a query parameter that carries JSON (:func:`~queue_engine.web.api.deps.json_text`)
  as ``content: application/json``, and the ``JsonValue`` schema;
- the bulk operations' id list capped at this server's ``QUEUE_ENGINE_WEB_BULK_MAX``.

It is served at ``/openapi.json``; :mod:`queue_engine.web.apidoc` renders it
as docs/reference/http-api.md.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from queue_engine.web.api.deps import ERROR_REASONS
from queue_engine.web.api.fields import JSON_VALUE_SCHEMA, with_json_values
from queue_engine.web.problems import PROBLEM_TYPE, PROBLEM_TYPES

SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer", "description": "QUEUE_ENGINE_WEB_TOKENS"},
    "basic": {"type": "http", "scheme": "basic", "description": "QUEUE_ENGINE_WEB_USERS"},
}
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}
#: The body of every error (RFC 9457); ``errors`` comes with a 422 of the validation type.
PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "An error, as RFC 9457 application/problem+json. `type` links to the "
    "explanation of the problem type (GET it: an HTML page).",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {
            "type": "string",
            "enum": sorted({p.uri for p in PROBLEM_TYPES}),
            "description": "the problem type: a link to its explanation",
        },
        "title": {"type": "string"},
        "status": {"type": "integer", "description": "the HTTP status"},
        "detail": {"type": "string", "description": "what went wrong, for a person"},
        "errors": {
            "type": "array",
            "description": "each invalid field (validation problems)",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}


def required_scope(route: APIRoute) -> str | None:
    """``read``, ``producer`` or ``operator``: the scope the route's dependency asks for."""
    for dependency in route.dependant.dependencies:
        name = getattr(dependency.call, "__name__", "")
        if name.startswith("require_"):
            return name.removeprefix("require_")
    return None


def api_routes(app: FastAPI) -> list[APIRoute]:
    """Every operation of the app's HTTP API (a compatibility face's included)."""
    routes: list[APIRoute] = getattr(app.state, "api_routes", None) or []
    if routes:
        return routes
    from queue_engine.web.api import api_routes as native

    return native()


def _json_parameters(operation: dict[str, Any]) -> None:
    """A query parameter whose text is JSON: its schema becomes ``content: application/json``."""
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        if schema.get("contentMediaType") == "application/json":
            del parameter["schema"]
            parameter["content"] = {"application/json": {"schema": schema["contentSchema"]}}


def _error_responses(
    operation: dict[str, Any], scope: str | None, *, database: bool, invalid: int = 422
) -> None:
    """Add the errors the operation can answer, and make every error a problem+json body.

    ``invalid``: the status of an invalid parameter or body (400 on the
    dataloader compatibility routes, 422 elsewhere).
    """
    responses = operation.setdefault("responses", {})
    statuses = set()
    if scope is not None:
        statuses |= {401, 403}
    if operation.get("parameters") or operation.get("requestBody"):
        statuses.add(invalid)
    if operation.get("requestBody"):
        statuses |= {400, 413, 415}
    if database:
        statuses.add(503)
    if invalid != 422:
        responses.pop("422", None)  # FastAPI's own, which such a route never answers
    for status in statuses:
        reason = ERROR_REASONS[422] if status == invalid else ERROR_REASONS[status]
        responses.setdefault(str(status), {"description": reason})
    for code, response in responses.items():
        if int(code) >= 400:
            content = response.setdefault("content", {})
            content[PROBLEM_TYPE] = {"schema": PROBLEM_REF}
            if (
                content.get("application/json", {})
                .get("schema", {})
                .get("$ref", "")
                .endswith("/HTTPValidationError")
            ):
                del content["application/json"]
                response["description"] = ERROR_REASONS[422]


def _cap_bulk_ids(doc: dict[str, Any], bulk_max: int) -> None:
    ids = doc["components"]["schemas"].get("BulkRequest", {}).get("properties", {}).get("ids")
    if ids is not None:
        for option in ids.get("anyOf", [ids]):
            if option.get("type") == "array":
                option["maxItems"] = bulk_max


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document, completed (cached on the app)."""
    if app.openapi_schema:
        return app.openapi_schema
    doc: dict[str, Any] = with_json_values(
        get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
    )
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Problem"] = PROBLEM_SCHEMA
    schemas["JsonValue"] = JSON_VALUE_SCHEMA
    doc["components"]["securitySchemes"] = SCHEMES
    for route in api_routes(app):
        scope = required_scope(route)
        for method in route.methods or ():
            # path_format: the document's path ("{key}" for a "{key:path}" route).
            operation = doc["paths"].get(route.path_format, {}).get(method.lower())
            if operation is None:
                continue
            operation["x-required-scope"] = scope or "none"
            operation["security"] = [{"bearer": []}, {"basic": []}] if scope else []
            _json_parameters(operation)
            _error_responses(
                operation,
                scope,
                database=route.path not in ("/info", "/status"),
                invalid=getattr(route, "invalid_status", 422),
            )
    _cap_bulk_ids(doc, app.state.web.settings.bulk_max)
    app.openapi_schema = doc
    return doc


def install(app: FastAPI) -> None:
    """Serve the completed document at ``/openapi.json``."""
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
