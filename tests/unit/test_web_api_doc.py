"""The HTTP API's OpenAPI document and the reference page rendered from it.

``docs/reference/http-api.md`` is generated (``python -m queue_engine.web.apidoc``);
this test renders it again and fails when the committed page differs, so a
route changed without regenerating the page is caught. It also holds the
document to two rules: every ``/api/v1`` operation needs a credential, and
every mutating one needs more than the read scope.
"""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from queue_engine.producer.validation import ENQUEUE_OPTIONS
from queue_engine.web.api.models import JobCreate, WorkflowNodeIn
from queue_engine.web.apidoc import current_markdown
from queue_engine.web.app import create_app
from queue_engine.web.openapi import openapi_document
from queue_engine.web.problems import PROBLEM_TYPE, PROBLEM_TYPES, PROBLEMS_BY_NAME
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


def test_every_error_is_a_documented_problem_and_fastapis_422_body_is_gone() -> None:
    doc = openapi_document(create_app(WebSettings()))
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    assert doc["components"]["schemas"]["Problem"]["required"] == [
        "type",
        "title",
        "status",
        "detail",
    ]
    for path, item in doc["paths"].items():
        if not path.startswith("/api/v1/"):
            continue
        for method, op in item.items():
            where = f"{method.upper()} {path}"
            statuses = {int(code) for code in op["responses"]}
            assert {401, 403, 503} <= statuses, where
            if op.get("parameters") or op.get("requestBody"):
                assert 422 in statuses, where
            if op.get("requestBody"):
                assert {400, 413, 415} <= statuses, where
            for code, response in op["responses"].items():
                if int(code) >= 400:
                    content = response["content"]
                    assert content[PROBLEM_TYPE]["schema"] == {
                        "$ref": "#/components/schemas/Problem"
                    }, (where, code)
                    assert "application/json" not in content, (where, code)


def test_ids_names_and_keys_carry_their_limits_in_the_document() -> None:
    doc = openapi_document(create_app(WebSettings()))
    for path, item in doc["paths"].items():
        for op in item.values():
            for p in op.get("parameters", []):
                schema = p.get("schema", {})
                options = schema.get("anyOf", [schema])
                if p["name"] in ("job_id", "workflow_id", "after_id", "before_id", "after"):
                    assert any(o.get("maximum") == 2**63 - 1 for o in options), (path, p)
                if p["name"] in ("queue", "task", "name", "worker_id"):
                    assert any(o.get("pattern") for o in options), (path, p)
    create = doc["components"]["schemas"]["JobCreate"]["properties"]
    assert create["priority"]["anyOf"][0]["maximum"] == 1000
    assert create["dedupe_key"]["anyOf"][0]["pattern"] == "^[^\\x00]*$"
    assert create["args"]["anyOf"][0]["additionalProperties"] == {
        "$ref": "#/components/schemas/JsonValue"
    }
    assert "oneOf" in doc["components"]["schemas"]["BulkRequest"]


def test_every_problem_kind_the_code_names_has_an_explanation() -> None:
    """``problem(..., kind="x")`` must name a registered type, or its link would lead nowhere."""
    root = Path(__file__).resolve().parents[2] / "queue_engine"
    named = set()
    for source in root.rglob("*.py"):
        named |= set(re.findall(r'kind="([a-z-]+)"', source.read_text()))
    assert named, "no kind found: the pattern is stale"
    assert named <= set(PROBLEMS_BY_NAME), named - set(PROBLEMS_BY_NAME)
    assert {p.uri for p in PROBLEM_TYPES} == set(
        openapi_document(create_app(WebSettings()))["components"]["schemas"]["Problem"][
            "properties"
        ]["type"]["enum"]
    )


def test_the_create_bodies_state_exactly_the_enqueue_options() -> None:
    """The HTTP API's constrained fields are the document's source; EnqueueOptions is the engine's."""
    assert list(JobCreate.model_fields) == list(ENQUEUE_OPTIONS)
    # skip_if is a node's own (a predicate on its parents), not an enqueue option.
    node_fields = set(WorkflowNodeIn.model_fields) - {"node", "after", "input", "skip_if"}
    assert node_fields == set(ENQUEUE_OPTIONS)
