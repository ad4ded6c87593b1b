"""The HTTP API's OpenAPI document and the reference page rendered from it.

``docs/reference/http-api.md`` is generated (``python -m queue_engine.web.apidoc``);
this test renders it again and fails when the committed page differs, so a
route changed without regenerating the page is caught. It also holds the
document to two rules: every ``/api/v1`` operation needs a credential, and
every mutating one needs more than the read scope.
"""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from queue_engine.web.apidoc import current_markdown
from queue_engine.web.app import create_app
from queue_engine.web.openapi import openapi_document
from queue_engine.web.settings import WebSettings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "http-api.md"


def test_reference_page_is_up_to_date() -> None:
    assert PAGE.read_text() == current_markdown(), (
        "docs/reference/http-api.md is stale: run "
        "`python -m queue_engine.web.apidoc > docs/reference/http-api.md`"
    )


def test_every_api_operation_needs_a_scope_and_writes_need_more_than_read() -> None:
    doc = openapi_document(create_app(WebSettings()))
    seen = 0
    for path, item in doc["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, op in item.items():
            seen += 1
            scope = op["x-required-scope"]
            assert scope in ("read", "producer", "operator"), f"{method} {path}: {scope}"
            if method != "get":
                assert scope != "read", (
                    f"{method.upper()} {path} changes something with the read scope"
                )
    assert seen > 20


def test_openapi_is_served_with_the_compatibility_routes() -> None:
    with TestClient(create_app(WebSettings(db_timeout_s=0.1))) as client:
        doc = client.get("/openapi.json").json()
        assert client.get("/docs").status_code == 404  # the explorer is opt-in (CDN scripts)
    with TestClient(create_app(WebSettings(db_timeout_s=0.1, api_explorer=True))) as client:
        assert client.get("/docs").status_code == 200
    assert {
        "/api/v1/jobs/trigger",
        "/api/v1/jobs/{job_id}/status",
        "/api/v1/jobs/{job_id}/cancel",
    } <= set(doc["paths"])
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
