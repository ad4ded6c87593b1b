"""The dashboard's login form: a signed session cookie instead of the browser's basic-auth box.

The cookie is made and checked by :mod:`queue_engine.web.auth` (HMAC-signed
name and expiry, no password, no scope); this module only draws the form,
checks the password with :func:`~queue_engine.web.auth.check_password` and
sets or clears the cookie. ``next`` is only ever a path on this server, so the
form cannot be used to send a visitor elsewhere after signing in.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from queue_engine.web.auth import SESSION_COOKIE, SESSION_TTL_S, check_password, session_cookie
from queue_engine.web.pages.actions import form_of
from queue_engine.web.state import WebState

router = APIRouter(include_in_schema=False)


def safe_next(value: str | None) -> str:
    """A local path to go to after signing in (anything else: the overview)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


def _form(request: Request, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    state: WebState = request.app.state.web
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    body = request.app.state.page_templates.get_template("login.html").render(
        prefix=prefix,
        schema=state.schema,
        next=safe_next(request.query_params.get("next")),
        error=error,
    )
    return HTMLResponse(body, status_code=status)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> HTMLResponse:
    """The sign-in form."""
    return _form(request)


@router.post("/login", response_model=None)
async def login(request: Request) -> HTMLResponse | RedirectResponse:
    """Check the password; on success set the session cookie and go where the visitor was going."""
    state: WebState = request.app.state.web
    form = await form_of(request)
    principal = check_password(state.settings, form.get("username", ""), form.get("password", ""))
    if principal is None:
        return _form(request, error="Wrong user name or password.", status=401)
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    response = RedirectResponse(prefix + safe_next(form.get("next")), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        session_cookie(state.settings, principal.name),
        max_age=SESSION_TTL_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/logout")
def logout(request: Request) -> RedirectResponse:
    """Forget the session cookie."""
    prefix = str(request.scope.get("root_path", "")).rstrip("/")
    response = RedirectResponse(f"{prefix}/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
