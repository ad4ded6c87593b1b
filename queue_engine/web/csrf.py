"""CSRF protection: a mutating request from a browser must come from our own origin.

A browser attaches basic-auth credentials and the login cookie to any request
to this server, including a form another site posts; the server must tell
those apart from the dashboard's own requests. The rule, for every method
other than GET, HEAD and OPTIONS:

1. A request with ``Authorization: Bearer`` is exempt: a browser never adds
   a bearer token by itself, so such a request was made on purpose by code
   holding the token.
2. ``Sec-Fetch-Site`` (sent by every current browser) must be ``same-origin``
   or ``none`` (typed by the user); ``same-site`` and ``cross-site`` are refused.
3. Otherwise ``Origin``, when present, must be this server's own origin (from
   the ``Host`` header) or one of ``QUEUE_ENGINE_WEB_TRUSTED_ORIGINS`` (a
   reverse proxy serving the dashboard under another name).
4. A request with neither header did not come from a current browser (curl
   with ``-u``, a script): allowed, it is authenticated as usual.

Refusals are 403 problems, before any route runs, so nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request, Response

from queue_engine.web.problems import problem
from queue_engine.web.state import WebState

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
ALLOWED_FETCH_SITES = frozenset({"same-origin", "none"})


def refusal(request: Request, trusted: frozenset[str]) -> str | None:
    """Why ``request`` looks like a cross-site forgery, or None when it may proceed."""
    if request.method in SAFE_METHODS:
        return None
    if request.headers.get("authorization", "").lower().startswith("bearer "):
        return None
    site = request.headers.get("sec-fetch-site")
    if site is not None and site.lower() not in ALLOWED_FETCH_SITES:
        return f"cross-site request refused (Sec-Fetch-Site: {site})"
    origin = request.headers.get("origin")
    if origin is not None:
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin.rstrip("/") != own and origin.rstrip("/") not in trusted:
            return f"cross-origin request refused (Origin {origin} is not {own})"
    return None


async def csrf_middleware(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """Refuse a forged mutating request with 403 before it reaches a route."""
    state: WebState = request.app.state.web
    why = refusal(request, state.settings.trusted_origins)
    if why is not None:
        return problem(403, why, kind="csrf")
    return await call_next(request)
