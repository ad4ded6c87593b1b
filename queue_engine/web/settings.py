"""``WebSettings``: what one ``queue-web`` process is configured with, checked at start.

Every field comes from a row of the settings table (:mod:`queue_engine.foundation.settings`,
the ``QUEUE_ENGINE_WEB_*`` variables plus the DSN and schema), so the variables,
the command-line options and ``docs/reference/configuration.md`` cannot drift
apart. Credentials are parsed here, once: a malformed token list stops the
process at start with a one-line :class:`~queue_engine.foundation.errors.ConfigError`
(exit 2) that names the variable and never echoes the secret itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from queue_engine.foundation import settings as table
from queue_engine.foundation.config import resolve_dsn, resolve_schema
from queue_engine.foundation.errors import ConfigError


class Scope(IntEnum):
    """What a credential may do; each scope includes the ones below it.

    ``read`` sees everything and changes nothing; ``producer`` may also create
    jobs (the enqueue-only face for other services); ``operator`` may also
    cancel, retry, pause, scale, park and run schedules.
    """

    READ = 1
    PRODUCER = 2
    OPERATOR = 3

    @classmethod
    def parse(cls, word: str) -> Scope:
        """``read``, ``producer`` or ``operator`` (any case); a ValueError otherwise."""
        try:
            return cls[word.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown scope {word.strip()!r}") from None

    @property
    def word(self) -> str:
        """The scope's name as configured and shown (``read``)."""
        return self.name.lower()


SCOPE_WORDS = tuple(s.word for s in Scope)


@dataclass(frozen=True, slots=True)
class User:
    """One dashboard login."""

    name: str
    scope: Scope
    password: str = field(repr=False)


def parse_tokens(raw: str | None) -> dict[str, Scope]:
    """``scope:token,scope:token`` → ``{token: scope}``; the error never quotes a token."""
    out: dict[str, Scope] = {}
    for index, entry in enumerate(_entries(raw), start=1):
        word, sep, token = entry.partition(":")
        where = f"{table.WEB_TOKENS.env}: entry {index}"
        if not sep or not token:
            raise ConfigError(f"{where} is not scope:token ({'/'.join(SCOPE_WORDS)})")
        if len(token) < 16:
            raise ConfigError(f"{where}: a token must be at least 16 characters long")
        try:
            out[token] = Scope.parse(word)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}; use {', '.join(SCOPE_WORDS)}") from None
    return out


def parse_users(raw: str | None) -> dict[str, User]:
    """``name:scope:password,...`` → ``{name: User}`` (a password may contain ``:``)."""
    out: dict[str, User] = {}
    for index, entry in enumerate(_entries(raw), start=1):
        parts = entry.split(":", 2)
        where = f"{table.WEB_USERS.env}: entry {index}"
        if len(parts) != 3 or not parts[0] or not parts[2]:
            raise ConfigError(f"{where} is not name:scope:password")
        name, word, password = parts
        try:
            scope = Scope.parse(word)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}; use {', '.join(SCOPE_WORDS)}") from None
        out[name] = User(name, scope, password)
    return out


def parse_origins(raw: str | None) -> frozenset[str]:
    """``https://a.example, http://b:8080`` → a set of origins without a trailing slash."""
    origins = set()
    for entry in _entries(raw):
        if not entry.startswith(("http://", "https://")):
            raise ConfigError(
                f"{table.WEB_TRUSTED_ORIGINS.env}: {entry!r} is not an origin (https://host[:port])"
            )
        origins.add(entry.rstrip("/"))
    return frozenset(origins)


def _entries(raw: str | None) -> list[str]:
    return [e.strip() for e in (raw or "").split(",") if e.strip()]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSettings:
    """The configuration of one ``queue-web`` process (secrets kept out of ``repr``)."""

    dsn: str = field(default="", repr=False)
    schema: str = table.SCHEMA.default
    host: str = table.WEB_HOST.default
    port: int = table.WEB_PORT.default
    read_dsn: str | None = field(default=None, repr=False)
    producer_dsn: str | None = field(default=None, repr=False)
    tokens: Mapping[str, Scope] = field(default_factory=dict, repr=False)
    users: Mapping[str, User] = field(default_factory=dict, repr=False)
    anonymous: Scope | None = None
    read_only: bool = False
    api_explorer: bool = False
    session_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    trusted_origins: frozenset[str] = frozenset()
    pool_size: int = table.WEB_POOL_SIZE.default
    db_timeout_s: float = table.WEB_DB_TIMEOUT_S.default
    bulk_max: int = table.WEB_BULK_MAX.default
    #: ``dataloader``: the compatibility face (:mod:`queue_engine.web.compat`); ``off``: native.
    compat: str = table.WEB_COMPAT.default
    compat_anonymous: bool = False
    compat_anonymous_any_host: bool = False
    environment: str = table.WEB_ENVIRONMENT.default

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> WebSettings:
        """Read every ``QUEUE_ENGINE_WEB_*`` variable; keyword arguments (options) win."""
        values: dict[str, Any] = {
            "dsn": resolve_dsn(overrides.get("dsn") or table.DSN.read(environ) or None),
            "schema": table.SCHEMA.read(environ),
            "host": table.WEB_HOST.read(environ),
            "port": table.WEB_PORT.read(environ),
            "read_dsn": table.WEB_READ_DSN.read(environ),
            "producer_dsn": table.WEB_PRODUCER_DSN.read(environ),
            "tokens": parse_tokens(table.WEB_TOKENS.read(environ)),
            "users": parse_users(table.WEB_USERS.read(environ)),
            "anonymous": None
            if table.WEB_ANONYMOUS.read(environ) == "none"
            else Scope.parse(table.WEB_ANONYMOUS.read(environ)),
            "read_only": table.WEB_READ_ONLY.read(environ) == "on",
            "api_explorer": table.WEB_API_EXPLORER.read(environ) == "on",
            "trusted_origins": parse_origins(table.WEB_TRUSTED_ORIGINS.read(environ)),
            "pool_size": table.WEB_POOL_SIZE.read(environ),
            "db_timeout_s": table.WEB_DB_TIMEOUT_S.read(environ),
            "bulk_max": table.WEB_BULK_MAX.read(environ),
            "compat": table.WEB_COMPAT.read(environ),
            "compat_anonymous": table.WEB_COMPAT_ANONYMOUS.read(environ) == "on",
            "compat_anonymous_any_host": table.WEB_COMPAT_ANONYMOUS_ANY_HOST.read(environ) == "on",
            "environment": table.WEB_ENVIRONMENT.read(environ),
        }
        secret = table.WEB_SESSION_SECRET.read(environ)
        if secret:
            values["session_secret"] = secret
        # An empty --dsn is no DSN: the one resolved above (the local fleet's, say) stays.
        values.update({k: v for k, v in overrides.items() if v is not None and v != ""})
        values["schema"] = resolve_schema(values["schema"])
        return cls(**values)

    def max_scope(self) -> Scope:
        """The highest scope any request may have: read when the server is read-only."""
        return Scope.READ if self.read_only else Scope.OPERATOR
