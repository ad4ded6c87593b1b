"""``docs/reference/http-api.md``, rendered from the OpenAPI document.

``tests/unit/test_web_api_doc.py`` renders the page again and fails when the
committed one differs, so the page cannot go stale. Regenerate it with::

    python -m queue_engine.web.apidoc > docs/reference/http-api.md
"""

from __future__ import annotations

import posixpath
import sys
from typing import Any

from queue_engine.web.api.deps import ERROR_REASONS
from queue_engine.web.openapi import HTTP_METHODS, openapi_document
from queue_engine.web.problems import PROBLEM_TYPES


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}{_limits(schema)}"
    fmt = schema.get("format")
    return f"{schema.get('type', 'any')}{f' ({fmt})' if fmt else ''}{_limits(schema)}"


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _limits(schema: dict[str, Any]) -> str:
    """What a schema allows beyond its type: ``1-1000``, ``matching ^[a-z]+$``, ``one of ...``."""
    out = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if schema.get("exclusiveMinimum") is not None:
        low = f"more than {_number(schema['exclusiveMinimum'])}"
        out.append(low + (f", at most {_number(high)}" if high is not None else ""))
    elif low is not None or high is not None:
        out.append(
            f"{_number(low)} to {_number(high)}"
            if low is not None and high is not None
            else (f"at least {_number(low)}" if low is not None else f"at most {_number(high)}")
        )
    if schema.get("minLength") is not None or schema.get("maxLength") is not None:
        out.append(f"{schema.get('minLength', 0)}-{schema.get('maxLength', '')} characters")
    if schema.get("maxItems") is not None:
        out.append(f"at most {schema['maxItems']} items")
    if schema.get("minItems"):
        out.append(f"at least {schema['minItems']}")
    if schema.get("pattern"):
        out.append(f"matching `{schema['pattern']}`")
    if schema.get("enum"):
        out.append("one of " + ", ".join(f"`{v}`" for v in schema["enum"]))
    if schema.get("const") is not None:
        out.append(f"exactly `{schema['const']}`")
    return f" ({'; '.join(out)})" if out else ""


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
            schema = p.get("schema")
            if schema is None:  # a parameter whose text is JSON
                json = p.get("content", {}).get("application/json", {}).get("schema", {})
                schema = {"type": f"JSON text: {_type(json)}"}
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_cell(_type(schema))} | "
                f"{'yes' if p.get('required') else 'no'} | "
                f"{_cell(p.get('description') or p.get('schema', {}).get('description', ''))} |"
            )
        lines.append("")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if body:
        lines += [f"Body: `{_type(body.get('schema', {}))}`.", ""]
    answers, problems = [], []
    for code, response in sorted(op.get("responses", {}).items()):
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        what = f"`{_type(schema)}`" if schema else _cell(response.get("description", ""))
        if int(code) >= 400:
            why = response.get("description", "")
            generic = why == ERROR_REASONS.get(int(code))
            problems.append(code if generic else f"{code} ({_cell(why)})")
        else:
            answers.append(f"{code} {what}")
    lines += ["Answers: " + "; ".join(answers) + ".", ""]
    if problems:
        lines += ["Errors (`application/problem+json`): " + ", ".join(problems) + ".", ""]
    return lines


def _rule(rule: dict[str, Any]) -> str:
    """A rule between fields (``oneOf`` of shapes), in words."""
    shapes = []
    for shape in rule.get("oneOf", []):
        parts = shape.get("allOf", [shape])
        given = [f"`{f}`" for p in parts for f in p.get("required", [])]
        absent = [
            f"`{f}`"
            for p in parts
            for f, spec in p.get("properties", {}).items()
            if spec == {"type": "null"}
        ]
        shapes.append(" and ".join(given) + (f" (without {', '.join(absent)})" if absent else ""))
    return "exactly one of: " + "; or ".join(shapes)


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### `{name}`", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    if "oneOf" in schema and "properties" in schema:
        lines += [f"Fields: {_rule(schema)}.", ""]
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
- **What is accepted** is stated by the document itself: ranges (ids are
  Postgres bigints, 1 to 2^63-1), name patterns and lengths, no NUL character
  anywhere, which fields go together. The server checks exactly that, with
  the same rules as the Python client and `queue-ctl`; `tests/process/test_web_api_fuzz.py`
  holds the two together with schemathesis.
- **Errors** are RFC 9457 `application/problem+json`: `{type, title, status,
  detail}`, plus `errors: [{field, message}]` when a request is invalid (422).
  `type` links to its explanation on the server (`/docs/problems#<name>`, listed
  [below](#problem-types)). 400 a body that is not JSON; 415 a body not sent as
  `application/json`; 404 unknown job, schedule or worker; 409 the job's status
  does not allow the action; 403 also when the database refuses the
  credential's role; 503 (with `Retry-After`) when the database is down or not
  migrated, and only then. Never a traceback, never another 5xx. Each
  operation lists the errors it can answer; where no reason is given: {reasons}.
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
    reasons = "; ".join(f"{code} {why}" for code, why in sorted(ERROR_REASONS.items()))
    lines = [HEADER.replace("{guide}", guide).replace("{reasons}", reasons)]
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
    lines += [
        "## Problem types",
        "",
        "The `type` of every error; a running server explains each at `/docs/problems`.",
        "",
        "| type | status | title | meaning |",
        "|---|---|---|---|",
    ]
    for kind in PROBLEM_TYPES:
        status = str(kind.status) if kind.status else "other"
        lines.append(
            f"| `{kind.name}` | {status} | {_cell(kind.title)} | {_cell(kind.explanation)} |"
        )
    return "\n".join(lines).rstrip() + "\n"


def current_markdown() -> str:
    """The page for this code's app (no database needed)."""
    from queue_engine.web.app import create_app
    from queue_engine.web.settings import WebSettings

    return render_markdown(openapi_document(create_app(WebSettings())))


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    sys.stdout.write(current_markdown())
