"""Who is asking, and may they: bearer tokens, basic auth, login cookies, scopes.

Three ways to present a credential, checked in this order:

- ``Authorization: Bearer <token>`` (the API): tokens from
  ``QUEUE_ENGINE_WEB_TOKENS``, each with its scope;
- ``Authorization: Basic`` (pages and scripts): logins from ``QUEUE_ENGINE_WEB_USERS``;
- the ``qe_session`` cookie a login form sets (:func:`session_cookie`): the
  user name and an expiry, signed with HMAC-SHA256 under
  ``QUEUE_ENGINE_WEB_SESSION_SECRET``. The cookie holds no password and no
  scope: the scope is looked up again on every request, so removing a user
  from the configuration ends their sessions at the next restart. The
  first-run sign-in link (:mod:`queue_engine.web.first_run`) sets the same
  cookie for :data:`LINK_USER`, signed with the link's own random key
  (:func:`link_cookie`), so that session is operator and ends with the process.

No credential: the ``QUEUE_ENGINE_WEB_ANONYMOUS`` scope (none by default, so
the request is refused with 401). A wrong credential is refused with 401 even
when anonymous access is allowed: a typo must not silently downgrade to the
anonymous scope. Every comparison is constant-time (:func:`hmac.compare_digest`).

Routes and pages depend on :func:`require_scope`; a credential below the
scope gets 403. ``QUEUE_ENGINE_WEB_READ_ONLY=on`` caps every credential at
read, so every mutating route answers 403 whatever the token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request

from queue_engine.web.first_run import SignInLink
from queue_engine.web.settings import Scope, WebSettings
from queue_engine.web.state import WebState

SESSION_COOKIE = "qe_session"
#: How long a login lasts.
SESSION_TTL_S = 12 * 3600
REALM = 'Basic realm="queue-web", charset="UTF-8"'
#: Who a session opened by the first-run sign-in link is (shown in the top bar
#: and in "canceled from the dashboard by ..."); the link exists only without users.
LINK_USER = "sign-in link"


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request: a name (never the secret), a scope and how it was proven."""

    name: str
    scope: Scope
    via: str

    def allows(self, scope: Scope) -> bool:
        """True when this caller may do what ``scope`` allows."""
        return self.scope >= scope


class Unauthorized(Exception):
    """No valid credential (401): the problem handler adds ``WWW-Authenticate``."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class SignInRequired(Unauthorized):
    """No credential on a dashboard page: the answer is the sign-in page, whatever ``Accept`` says."""


class Forbidden(Exception):
    """A valid credential without the scope a route needs (403)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _find_token(settings: WebSettings, presented: str) -> Scope | None:
    found = None
    for token, scope in settings.tokens.items():
        # Compare against every token, so the time taken says nothing about which matched.
        if hmac.compare_digest(token.encode(), presented.encode()):
            found = scope
    return found


def check_password(settings: WebSettings, name: str, password: str) -> Principal | None:
    """The principal of a correct name and password, else None (for basic auth and login forms)."""
    user = settings.users.get(name)
    expected = user.password if user is not None else "\x00never"
    ok = hmac.compare_digest(expected.encode(), password.encode())
    if user is None or not ok:
        return None
    return Principal(user.name, user.scope, "password")


def _sign(secret: str, payload: str) -> str:
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def _cookie(secret: str, name: str, now: float | None) -> str:
    expires = int((time.time() if now is None else now) + SESSION_TTL_S)
    payload = f"{base64.urlsafe_b64encode(name.encode()).decode()}.{expires}"
    return f"{payload}.{_sign(secret, payload)}"


def _cookie_name(secret: str, value: str, now: float | None) -> str | None:
    """The name in a cookie signed under ``secret`` and not expired, else None."""
    payload, _, signature = value.rpartition(".")
    if not payload or not hmac.compare_digest(_sign(secret, payload), signature):
        return None
    encoded, _, expires = payload.partition(".")
    try:
        name = base64.urlsafe_b64decode(encoded.encode()).decode()
        if int(expires) < (time.time() if now is None else now):
            return None
    except (ValueError, binascii.Error):
        return None
    return name


def session_cookie(settings: WebSettings, name: str, *, now: float | None = None) -> str:
    """The value of a login cookie for user ``name`` (expires after :data:`SESSION_TTL_S`)."""
    return _cookie(settings.session_secret, name, now)


def session_user(
    settings: WebSettings, value: str, *, now: float | None = None
) -> Principal | None:
    """The principal of a valid, unexpired login cookie whose user still exists, else None."""
    name = _cookie_name(settings.session_secret, value, now)
    user = None if name is None else settings.users.get(name)
    return None if user is None else Principal(user.name, user.scope, "session")


def link_cookie(link: SignInLink, *, now: float | None = None) -> str:
    """The session cookie the sign-in link sets (operator, signed with the link's key)."""
    return _cookie(link.session_key, LINK_USER, now)


def link_user(link: SignInLink, value: str, *, now: float | None = None) -> Principal | None:
    """The operator of a valid cookie set by this process's sign-in link, else None."""
    if _cookie_name(link.session_key, value, now) != LINK_USER:
        return None
    return Principal(LINK_USER, Scope.OPERATOR, "session")


def _capped(settings: WebSettings, principal: Principal) -> Principal:
    cap = settings.max_scope()
    if principal.scope <= cap:
        return principal
    return Principal(principal.name, cap, principal.via)


def authenticate(request: Request) -> Principal | None:
    """The request's principal (capped by the read-only switch); None: no credential at all.

    Raises :class:`Unauthorized` for a credential that is present but wrong.
    """
    state: WebState = request.app.state.web
    settings = state.settings
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer":
        scope = _find_token(settings, value.strip())
        if scope is None:
            raise Unauthorized("the bearer token is not valid")
        return _capped(settings, Principal(f"token:{scope.word}", scope, "token"))
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise Unauthorized("the basic credentials are not valid base64") from None
        name, _, password = decoded.partition(":")
        principal = check_password(settings, name, password)
        if principal is None:
            raise Unauthorized("wrong user name or password")
        return _capped(settings, principal)
    if header:
        raise Unauthorized("unsupported Authorization scheme: use Bearer or Basic")
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        principal = session_user(settings, cookie)
        if principal is None and state.sign_in_link is not None:
            principal = link_user(state.sign_in_link, cookie)
        if principal is not None:
            return _capped(settings, principal)
    if settings.anonymous is not None:
        return _capped(settings, Principal("anonymous", settings.anonymous, "anonymous"))
    return None


#: Who a request without credentials is on a dataloader route that lets it in.
COMPAT_ANONYMOUS = "anonymous (dataloader route)"


def require_scope(scope: Scope, *, compat_route: bool = False) -> Callable[[Request], Principal]:
    """A FastAPI dependency: the request's principal, which holds at least ``scope``.

    ``Depends(require_scope(Scope.OPERATOR))`` on a route or page; 401 without
    a (valid) credential, 403 with one below the scope. ``compat_route``: a
    route of the dataloader face, which a request without credentials may use
    at ``scope`` when ``QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS=on`` (dataloader had
    no authentication); a wrong credential is still 401.
    """

    def dependency(request: Request) -> Principal:
        principal = authenticate(request)
        state: WebState = request.app.state.web
        if (
            compat_route
            and state.settings.compat_anonymous
            and (principal is None or principal.via == "anonymous")
        ):
            principal = _capped(state.settings, Principal(COMPAT_ANONYMOUS, scope, "anonymous"))
        if principal is None:
            raise Unauthorized("authentication required: a bearer token or a login")
        if not principal.allows(scope):
            why = " (the server is read-only)" if state.settings.read_only else ""
            raise Forbidden(
                f"this needs the {scope.word} scope; the credential has {principal.scope.word}{why}"
            )
        request.state.principal = principal
        return principal

    dependency.__name__ = f"require_{scope.word}"
    return dependency


#: The three dependencies routes use.
require_read = require_scope(Scope.READ)
require_producer = require_scope(Scope.PRODUCER)
require_operator = require_scope(Scope.OPERATOR)
