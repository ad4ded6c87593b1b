"""A ``queue-web`` with nothing configured: a sign-in link on loopback, a refusal elsewhere.

With no bearer token (``QUEUE_ENGINE_WEB_TOKENS``), no login
(``QUEUE_ENGINE_WEB_USERS``) and no anonymous scope, nobody could use the
server: every request would be refused. That is a first run, not a choice,
so ``queue-web`` does what Jupyter does:

- on a loopback address (127.0.0.0/8, ``::1``, ``localhost``) it makes a
  random token, prints one link (``http://127.0.0.1:8080/login?token=...``)
  and logs one warning; the link signs a browser in as operator
  (:mod:`queue_engine.web.auth` signs that session with this process's own
  random key, so it ends with the process). Only someone who can read the
  terminal (or the service's journal) gets the link, and the address is
  reachable only from this machine;
- on any other address it refuses to start (:class:`ConfigError`, exit 2):
  a server reachable from the network with no credential configured is a
  mistake, and a link in a log would be the only key to it.

Configuring anything (a token, a login, or ``QUEUE_ENGINE_WEB_ANONYMOUS=read``,
which is a choice) turns this off: the link never coexists with real credentials.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field
from urllib.parse import quote

from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import ConfigError
from queue_engine.web.settings import WebSettings

#: Where the guide explains the first run, logins and tokens (in the refusal's line).
DOCS = "docs/guides/web.md#first-run-and-signing-in"
#: The same section online (the sign-in page links to it; the base is the
#: ``Documentation=`` of ``systemd/queue-web.service``).
DOCS_URL = f"https://github.com/queue-engine/queue-engine/blob/main/{DOCS}"


def _random() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class SignInLink:
    """This process's sign-in token, and the key that signs the sessions it opens.

    Two random values, so a session cookie (a MAC under ``session_key``) says
    nothing about the token. Neither is ever in a ``repr``, a log line or a page.
    """

    token: str = field(default_factory=_random, repr=False)
    session_key: str = field(default_factory=_random, repr=False)

    def matches(self, presented: str) -> bool:
        """True when ``presented`` is the token (constant time)."""
        return hmac.compare_digest(self.token.encode(), presented.encode())

    def url(self, host: str, port: int) -> str:
        """The link to print: ``http://<host>:<port>/login?token=...`` (IPv6 in brackets)."""
        name = host.strip("[]")
        if ":" in name:
            name = f"[{name}]"
        return f"http://{name}:{port}/login?token={quote(self.token, safe='')}"


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach: 127.0.0.0/8, ``::1``, ``localhost``."""
    name = host.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def nothing_configured(settings: WebSettings) -> bool:
    """True when no token, no login and no anonymous scope (nor anonymous dataloader routes)."""
    return (
        not settings.tokens
        and not settings.users
        and settings.anonymous is None
        and not settings.compat_anonymous
    )


def sign_in_link(settings: WebSettings) -> SignInLink | None:
    """The link this process offers: None when credentials are configured.

    Raises :class:`ConfigError` (exit 2) when nothing is configured and the
    server would listen on an address other machines can reach.
    """
    if not nothing_configured(settings):
        return None
    if not is_loopback(settings.host):
        raise ConfigError(
            f"no login or token configured, and {settings.host} is not a loopback address: "
            f"set {table.WEB_USERS.env} (name:scope:password) or {table.WEB_TOKENS.env} "
            f"(scope:token), or listen on 127.0.0.1 to get a sign-in link (see {DOCS})"
        )
    return SignInLink()
