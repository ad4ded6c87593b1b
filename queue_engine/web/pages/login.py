"""Signing in: the form, the first-run link, and what a browser gets instead of a raw 401.

The cookie is made and checked by :mod:`queue_engine.web.auth` (HMAC-signed
name and expiry, no password, no scope); this module draws the sign-in page,
checks a password with :func:`~queue_engine.web.auth.check_password` or the
first-run token (``GET /login?token=...``, see
:mod:`queue_engine.web.first_run`) and sets or clears the cookie. ``next`` is
only ever a path on this server, so the page cannot be used to send a
visitor elsewhere after signing in.

A 401 goes to a browser as this page, never as raw JSON (:func:`unauthorized`):
a request whose ``Accept`` ranks ``text/html`` above JSON is sent to
``/login?next=<where it was going>`` with a 303, as Jupyter, Grafana, GitLab
and Django's ``login_required`` do. A redirect rather than a 401 page: the
address bar then shows the sign-in page (a reload does not repeat the
refused request), the form returns the visitor where they were going, and no
``WWW-Authenticate: Basic`` challenge makes the browser pop up its own
password box. API clients (JSON, ``*/*``) keep the problem+json 401.
"""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from queue_engine.web.auth import (
    SESSION_COOKIE,
    SESSION_TTL_S,
    SignInRequired,
    Unauthorized,
    check_password,
    link_cookie,
    session_cookie,
)
from queue_engine.web.first_run import DOCS_URL
from queue_engine.web.pages.actions import form_of
from queue_engine.web.problems import for_error
from queue_engine.web.state import WebState

router = APIRouter(include_in_schema=False)

#: The sign-in page's sentence for a token that is not this process's.
WRONG_LINK = (
    "This sign-in link is not valid: queue-web makes a new one each time it starts. "
    "Open the link the running queue-web printed."
)
#: ... and for a token when this server has no sign-in link (credentials are configured).
NO_LINK = (
    "Sign-in links work only while queue-web has no logins or tokens configured: "
    "sign in with a user name and password."
)
#: Media types an API client asks for; ``*/*`` is what curl and HTTP libraries send.
_JSON_TYPES = frozenset({"application/json", "application/problem+json", "application/*", "*/*"})


def safe_next(value: str | None) -> str:
    """A local path to go to after signing in (anything else: the overview)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def prefers_html(request: Request) -> bool:
    """True when ``Accept`` ranks ``text/html`` above JSON: a browser, not an API client.

    Browsers send ``text/html,...,*/*;q=0.8``; curl and HTTP libraries send
    ``*/*`` (or nothing), API clients ``application/json``: a tie is JSON.
    """
    html = json = 0.0
    for item in request.headers.get("accept", "").split(","):
        media, *params = (part.strip() for part in item.split(";"))
        quality = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        media = media.lower()
        if media == "text/html":
            html = max(html, quality)
        elif media in _JSON_TYPES:
            json = max(json, quality)
    return html > json


def login_location(request: Request) -> str:
    """Where a visitor without a credential is sent: the sign-in page, then back here.

    A GET comes back to the page it asked for; another method (a button
    pressed after the session ended) cannot be repeated by a redirect, so
    it goes to the overview after signing in.
    """
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    if request.method not in ("GET", "HEAD"):
        return f"{prefix}/login"
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"{prefix}/login?next={quote(target)}"


def _form(request: Request, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    state: WebState = request.app.state.web
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    body = request.app.state.page_templates.get_template("login.html").render(
        prefix=prefix,
        schema=state.schema,
        next=safe_next(request.query_params.get("next")),
        error=error,
        users=bool(state.settings.users),
        link=state.sign_in_link is not None,
        origin=str(request.base_url).rstrip("/"),
        docs=DOCS_URL,
    )
    return HTMLResponse(body, status_code=status)


def _signed_in(request: Request, cookie: str, next_path: str | None) -> RedirectResponse:
    """Set the session cookie and go where the visitor was going (303, so a reload is a GET)."""
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    response = RedirectResponse(prefix + safe_next(next_path), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        cookie,
        max_age=SESSION_TTL_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/login", response_model=None)
def login_form(request: Request) -> HTMLResponse | RedirectResponse:
    """The sign-in page; with ``?token=`` the first-run link, which signs in as operator.

    The token is compared in constant time and never written back into the
    page; a right one redirects to a URL without it.
    """
    token = request.query_params.get("token")
    if token is None:
        return _form(request)
    state: WebState = request.app.state.web
    link = state.sign_in_link
    if link is None:
        return _form(request, error=NO_LINK, status=401)
    if not link.matches(token):
        return _form(request, error=WRONG_LINK, status=401)
    return _signed_in(request, link_cookie(link), request.query_params.get("next"))


@router.post("/login", response_model=None)
async def login(request: Request) -> HTMLResponse | RedirectResponse:
    """Check the password; on success set the session cookie and go where the visitor was going."""
    state: WebState = request.app.state.web
    form = await form_of(request)
    principal = check_password(state.settings, form.get("username", ""), form.get("password", ""))
    if principal is None:
        return _form(request, error="Wrong user name or password.", status=401)
    return _signed_in(request, session_cookie(state.settings, principal.name), form.get("next"))


@router.post("/logout")
def logout(request: Request) -> RedirectResponse:
    """Forget the session cookie."""
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    response = RedirectResponse(f"{prefix}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


async def unauthorized(request: Request, exc: Exception) -> Response:
    """A 401 as the client wants it: the sign-in page for a browser, problem+json otherwise.

    A browser that sent no credential, or any visitor of a dashboard page
    (:class:`SignInRequired`), is redirected to the sign-in page; a browser
    that sent a wrong credential (basic auth typed into its own box) gets the
    page with the reason and the API's challenge, status 401.
    """
    assert isinstance(exc, Unauthorized)
    problem = for_error(exc)
    assert problem is not None
    response: Response = problem
    if isinstance(exc, SignInRequired) or prefers_html(request):
        if "authorization" in request.headers:
            response = _form(
                request, error=f"{exc.detail[:1].upper()}{exc.detail[1:]}.", status=401
            )
            response.headers["WWW-Authenticate"] = problem.headers["WWW-Authenticate"]
        else:
            response = RedirectResponse(login_location(request), status_code=303)
    response.headers["Vary"] = "Accept"
    return response


def install(app: FastAPI) -> None:
    """Answer :class:`Unauthorized` with :func:`unauthorized`.

    Called after :func:`queue_engine.web.problems.install`, whose handler for
    the same class this replaces (it still makes the JSON answer).
    """
    app.add_exception_handler(Unauthorized, unauthorized)
