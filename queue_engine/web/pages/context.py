"""What every dashboard page gets: who is looking, a connection, the snapshot, rendering.

:func:`page_context` is the pages' one FastAPI dependency. It authenticates
through :mod:`queue_engine.web.auth` (a login cookie, basic auth, a bearer
token or the anonymous scope), sends a visitor with no credential to the
login form, and hands the route a :class:`PageContext`: the principal's scope
decides both which pool the connection comes from (a read-only visitor
borrows from the monitor-role pool when one is configured) and whether the
templates draw any mutating control.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Depends, Request
from jinja2 import Environment

from queue_engine.operator.audit import Actor
from queue_engine.web import live
from queue_engine.web.auth import Principal, SignInRequired, authenticate
from queue_engine.web.pages.render import spark_data
from queue_engine.web.settings import Scope
from queue_engine.web.state import Connection, WebState

#: The dashboard's pages, in the order of the top bar: (key, label, path).
NAV = (
    ("overview", "Overview", "/"),
    ("jobs", "Jobs", "/jobs"),
    ("workflows", "Workflows", "/workflows"),
    ("queues", "Queues", "/queues"),
    ("limits", "Limits", "/limits"),
    ("workers", "Workers", "/workers"),
    ("schedules", "Schedules", "/schedules"),
)


@dataclass
class PageContext:
    """One page request: the state, the principal and the shared aggregator."""

    request: Request
    state: WebState
    principal: Principal
    aggregator: live.Aggregator
    env: Environment

    @property
    def schema(self) -> str:
        """The engine schema."""
        return self.state.schema

    @property
    def prefix(self) -> str:
        """Path prefix of the dashboard (a reverse proxy's ``root_path``)."""
        return str(self.request.scope.get("root_path", "")).rstrip("/")

    @property
    def can_operate(self) -> bool:
        """True when this visitor may see and use mutating controls."""
        return self.principal.allows(Scope.OPERATOR)

    @property
    def snapshot(self) -> live.FleetSnapshot:
        """The aggregator's latest figures."""
        return self.aggregator.snapshot

    @property
    def actor(self) -> Actor:
        """Who the audit of controls names for this visitor's changes (the login's name)."""
        return Actor(self.principal.name, "dashboard")

    def now(self) -> datetime:
        """Wall-clock now, UTC."""
        return datetime.now(UTC)

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection for this visitor's scope."""
        with self.state.connection(self.principal.scope) as conn:
            yield conn

    def render(self, template: str, **values: Any) -> str:
        """Render a template with what every page shows (top bar, totals, controls or not)."""
        snap = self.snapshot
        history = self.aggregator.history
        end = snap.taken_at.timestamp() if snap.taken_at else None

        def spark(queue: str, figure: str, css: str = "") -> Any:
            return spark_data(history.series(queue, figure), css, end=end)

        notice, kind = _notice(self.request)
        base = {
            "prefix": self.prefix,
            "schema": self.schema,
            "nav": "",
            "title": "",
            "nav_items": [(k, label, self.prefix + path) for k, label, path in NAV],
            "snap": snap,
            "totals": snap.totals(),
            "spark": spark,
            "user_name": self.principal.name,
            "can_operate": self.can_operate,
            "signed_in": self.principal.via == "session",
            "notice": notice,
            "notice_kind": kind,
            "static": lambda name: f"{self.prefix}/static/{name}",
        }
        return self.env.get_template(template).render(base | values)


def _notice(request: Request) -> tuple[str | None, str]:
    """The banner an action left in the query string after its redirect (``?done=`` / ``?failed=``)."""
    done = request.query_params.get("done")
    if done:
        return done[:300], "ok"
    failed = request.query_params.get("failed")
    if failed:
        return failed[:300], "error"
    return None, "info"


def page_principal(request: Request, scope: Scope) -> Principal:
    """The visitor, holding ``scope``; no credential at all → the sign-in page (303).

    Always the sign-in page, even when no login is configured: it says how
    to configure one (and, on a first run, to open the printed link).
    """
    principal = authenticate(request)
    if principal is None:
        raise SignInRequired("authentication required: a login, a bearer token or basic auth")
    if not principal.allows(scope):
        # Reuse the API's wording and status (403) through its dependency.
        from queue_engine.web.auth import require_scope

        return require_scope(scope)(request)
    request.state.principal = principal
    return principal


def page_context(request: Request) -> PageContext:
    """The dependency of every read-only page (scope read)."""
    return _context(request, page_principal(request, Scope.READ))


def operator_context(request: Request) -> PageContext:
    """The dependency of every dashboard action (scope operator)."""
    return _context(request, page_principal(request, Scope.OPERATOR))


def _context(request: Request, principal: Principal) -> PageContext:
    app = request.app
    return PageContext(
        request=request,
        state=app.state.web,
        principal=principal,
        aggregator=app.state.live,
        env=app.state.page_templates,
    )


#: A page's parameter: ``ctx: Page`` (scope read).
Page = Annotated[PageContext, Depends(page_context)]
#: An action's parameter: ``ctx: Operator`` (scope operator).
Operator = Annotated[PageContext, Depends(operator_context)]
