"""``/docs/problems``: the page every problem's ``type`` links to, one anchor per type.

Rendered from :data:`queue_engine.web.problems.PROBLEM_TYPES`, the list
:func:`~queue_engine.web.problems.problem` itself refuses to step outside,
so a ``type`` link always lands on its explanation. Plain HTML with its own
few lines of style: no credential, no script, no template shared with the
dashboard, so it answers whatever state the dashboard or the database is in.
"""

from __future__ import annotations

from html import escape

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from queue_engine.web.problems import PAGE_PATH, PROBLEM_TYPES

router = APIRouter()

STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 46rem; margin: 2rem auto;
       padding: 0 1rem; color: #1f2328; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.15rem; margin-bottom: .25rem; }
section { border-top: 1px solid #d0d7de; padding: .5rem 0; }
section:target { background: #fff8c5; }
code { font: 14px ui-monospace, monospace; background: #f6f8fa; padding: 0 .25rem; }
.status { color: #57606a; font-weight: normal; }
"""


def render() -> str:
    """The page: an introduction, then one section per problem type (``id`` = its name)."""
    sections = []
    for kind in PROBLEM_TYPES:
        status = f"HTTP {kind.status}" if kind.status else "any other status"
        sections.append(
            f'<section id="{escape(kind.name)}">'
            f'<h2>{escape(kind.title)} <span class="status">{status}</span></h2>'
            f"<p>{escape(kind.explanation)}</p>"
            f"<p>type: <code>{escape(kind.uri)}</code></p></section>"
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>queue-engine: problem types</title><style>{STYLE}</style></head><body>"
        "<h1>Problem types of the queue-engine HTTP API</h1>"
        "<p>Every error of the API is an RFC 9457 <code>application/problem+json</code> body "
        "<code>{type, title, status, detail}</code>; its <code>type</code> links to one of the "
        "sections below. A 422 also lists each invalid field in <code>errors</code>. "
        'The operations and what each accepts: <a href="/openapi.json">/openapi.json</a>.</p>'
        + "".join(sections)
        + "</body></html>"
    )


@router.get(PAGE_PATH, response_class=HTMLResponse, include_in_schema=False)
def problems_page() -> HTMLResponse:
    """The problem types, as HTML (no credential needed)."""
    return HTMLResponse(render())
