"""``docs/reference/http-api.md``, rendered from the OpenAPI document.

``tests/unit/test_web_api_doc.py`` renders the page again and fails when the
committed one differs, so the page cannot go stale. Regenerate it with::

    python -m queue_engine.web.apidoc > docs/reference/http-api.md
"""

from __future__ import annotations

import posixpath
import sys
from typing import Any

from queue_engine.web.openapi import HTTP_METHODS, openapi_document


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    fmt = schema.get("format")
    return f"{schema.get('type', 'any')}{f' ({fmt})' if fmt else ''}"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    description = op.get("description") or op.get("summary") or ""
    lines += [" ".join(description.split()), ""]
    lines.append(f"Scope: **{op.get('x-required-scope', 'none')}**.")
    lines.append("")
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
        for p in params:
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_cell(_type(p.get('schema', {})))} | "
                f"{'yes' if p.get('required') else 'no'} | "
                f"{_cell(p.get('description') or p.get('schema', {}).get('description', ''))} |"
            )
        lines.append("")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if body:
        lines += [f"Body: `{_type(body.get('schema', {}))}`.", ""]
    answers = []
    for code, response in sorted(op.get("responses", {}).items()):
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        what = f"`{_type(schema)}`" if schema else _cell(response.get("description", ""))
        answers.append(f"{code} {what}")
    lines += ["Answers: " + "; ".join(answers) + ".", ""]
    return lines


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### `{name}`", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    props = schema.get("properties", {})
    if props:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | meaning |", "|---|---|---|---|"]
        for field, spec in props.items():
            lines.append(
                f"| `{field}` | {_cell(_type(spec))} | {'yes' if field in required else 'no'} | "
                f"{_cell(spec.get('description', ''))} |"
            )
        lines.append("")
    return lines


#: The guide the page links to, and where the page lives (the link is relative).
GUIDE = "docs/guides/web.md"
PAGE = "docs/reference/http-api.md"

HEADER = """\
# HTTP API reference

Generated from the OpenAPI document of `queue-web` (`python -m queue_engine.web.apidoc >
docs/reference/http-api.md`); a test fails when this page is stale. A running
server serves the same document at `/openapi.json` (and the Swagger UI explorer
at `/docs` with `QUEUE_ENGINE_WEB_API_EXPLORER=on`).
How to run the server, configure credentials and secure it:
[the web guide]({guide}).

- **Authentication**: `Authorization: Bearer <token>` (tokens from
  `QUEUE_ENGINE_WEB_TOKENS`), or basic auth / the login cookie (logins from
  `QUEUE_ENGINE_WEB_USERS`). Scopes: **read** (see everything), **producer**
  (also create jobs), **operator** (also act on jobs, queues, workers,
  schedules). No credential: 401; a lower scope: 403.
- **Errors** are RFC 9457 `application/problem+json`: `{type, title, status,
  detail}`, plus `errors: [{field, message}]` when a request is invalid (422).
  404 unknown job, schedule or worker; 409 the job's status does not allow the
  action; 403 also when the database refuses the credential's role; 503 (with
  `Retry-After`) when the database is down or not migrated. Never a traceback.
- **Idempotency**: the `Idempotency-Key` header is the job's idempotency key:
  the same key and payload again answers the existing job with 200, the same
  key with another payload 422.
- **Pagination** is by keyset: pass a page's `next_after_id` as `after_id`.
- **Compatibility routes** for clients of HTTP-triggered ETL services:
  `POST /api/v1/jobs/trigger` (answers `{job_id, status}`),
  `GET /api/v1/jobs/{job_id}/status`, `POST /api/v1/jobs/{job_id}/cancel`.

## Operations
"""


def render_markdown(doc: dict[str, Any]) -> str:
    """The reference page for an OpenAPI document (deterministic: sorted by tag, then path)."""
    guide = posixpath.relpath(GUIDE, posixpath.dirname(PAGE))
    lines = [HEADER.replace("{guide}", guide)]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in doc["paths"].items():
        for method in HTTP_METHODS:
            if method in item:
                op = item[method]
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((path, method, op))
    for tag in sorted(by_tag):
        lines += [f"## {tag}", ""]
        for path, method, op in by_tag[tag]:
            lines += _operation(path, method, op)
    lines += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        lines += _schema(name, schema)
    return "\n".join(lines).rstrip() + "\n"


def current_markdown() -> str:
    """The page for this code's app (no database needed)."""
    from queue_engine.web.app import create_app
    from queue_engine.web.settings import WebSettings

    return render_markdown(openapi_document(create_app(WebSettings())))


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    sys.stdout.write(current_markdown())
