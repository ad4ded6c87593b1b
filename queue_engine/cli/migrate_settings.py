"""``queue-ctl migrate-settings --from SYSTEM``: an old system's environment, translated.

It reads the variables dataloader, pqrun or queue_workflows read (from the
environment, and from a dotenv file with ``--env-file``) and prints the
environment queue-engine reads in their place: ``QUEUE_ENGINE_*=...`` lines,
libpq ``PG*`` lines where libpq's own variable is the counterpart, and a
comment line for every old name that has none (saying why), for every value
it had to change (a SQLAlchemy URL rewritten as a libpq URI, seconds rounded
to whole ones, a pool plus its overflow) and for every default that differs.
The output is an environment file (systemd ``EnvironmentFile=``, compose
``env_file:``, dotenv, or a shell's ``set -a; . FILE``): comments on lines of
their own, values quoted where a shell would need it.

What maps to what is data, in :mod:`queue_engine.foundation.legacy_settings`,
which the start-up notices read too. Passwords inside a DSN are printed (the
output is meant to become an environment file) but never logged, and an
error about a DSN never shows it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import click

from queue_engine.foundation import legacy_settings as legacy
from queue_engine.foundation import settings as table
from queue_engine.foundation.config import validate_schema
from queue_engine.foundation.errors import ConfigError

#: A value written without quotes: what no shell, systemd or dotenv reads differently.
_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./-]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
#: pydantic's words for a boolean (dataloader's ``DEBUG``, ``LOCAL``).
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})
#: asyncpg's ``ssl=`` words as libpq's ``sslmode``.
_SSL = {"true": "require", "false": "disable"}


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of a dotenv file, as pydantic-settings (python-dotenv) reads one.

    ``NAME=value``, ``export NAME=value``, ``'single'`` or ``"double"`` quoted
    values (``\\n``, ``\\"`` and ``\\\\`` escapes in double quotes), ``#``
    comments on their own lines or after an unquoted value. A line of any other
    shape is a ConfigError naming the file and line only: the line may hold a
    password.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(f"--env-file: cannot read {path}: {reason}") from None
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").lstrip()
        name, sep, rest = line.partition("=")
        name = name.strip()
        if not sep or not _NAME.fullmatch(name):
            raise ConfigError(f"{path}:{number}: not a NAME=value line")
        value = _env_value(rest.strip())
        if value is None:
            raise ConfigError(f"{path}:{number}: {name}'s value has an unclosed quote")
        found[name] = value
    return found


def _env_value(rest: str) -> str | None:
    """The value after ``=``: unquoted (to a `` #`` comment), or quoted; None if unclosed."""
    if rest[:1] == "'":
        end = rest.find("'", 1)
        return None if end < 0 else rest[1:end]
    if rest[:1] == '"':
        out, i = [], 1
        while i < len(rest):
            char = rest[i]
            if char == "\\" and i + 1 < len(rest):
                out.append({"n": "\n", "t": "\t"}.get(rest[i + 1], rest[i + 1]))
                i += 2
                continue
            if char == '"':
                return "".join(out)
            out.append(char)
            i += 1
        return None
    return re.split(r"\s+#", rest, maxsplit=1)[0].strip()


def env_line(name: str, value: str) -> str:
    """``NAME=value``, single-quoted unless every character is safe bare."""
    if _BARE.fullmatch(value):
        return f"{name}={value}"
    if "'" in value or "\n" in value:
        raise ConfigError(
            f"{name}: its value holds a quote or a line break, which an env file cannot"
        )
    return f"{name}='{value}'"


def libpq_uri(url: str, where: str) -> tuple[str, list[str]]:
    """A database URL as libpq reads it, and what was changed (no values: they may be secret).

    ``postgresql+asyncpg://u:p@h:5432/db?ssl=require`` (SQLAlchemy) becomes
    ``postgresql://u:p@h:5432/db?sslmode=require``; a parameter libpq does not
    know (asyncpg's ``command_timeout``, ``prepared_statement_cache_size``) is
    left out and named. A libpq ``key=value`` string passes as it is. Anything
    that is not a PostgreSQL URL, or that libpq refuses, is a ConfigError
    naming ``where`` and never showing the value.
    """
    import psycopg
    from psycopg import conninfo, pq

    changes: list[str] = []
    if "://" in url:
        parts = urlsplit(url)
        base, plus, driver = parts.scheme.partition("+")
        if base not in ("postgresql", "postgres"):
            raise ConfigError(f"{where} is not a PostgreSQL URL (scheme {parts.scheme!r})")
        if plus:
            changes.append(f"the driver suffix +{driver} was removed (libpq URI)")
        known = {o.keyword.decode() for o in pq.Conninfo.get_defaults()}
        query = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key == "ssl":
                query.append(("sslmode", _SSL.get(value.lower(), value)))
                changes.append("ssl= became sslmode=")
            elif key in known:
                query.append((key, value))
            else:
                changes.append(f"the parameter {key}= was left out (libpq has none)")
        url = f"postgresql://{parts.netloc}{parts.path}"
        if query:
            url += "?" + urlencode(query)
    try:
        params = conninfo.conninfo_to_dict(url)
    except psycopg.Error:
        raise ConfigError(f"{where} is not a database URL libpq can read") from None
    ports = str(params.get("port") or "").split(",")
    if not all(p.isdigit() for p in ports if p):
        raise ConfigError(f"{where} is not a database URL libpq can read (its port)")
    return url, changes


@dataclass
class Output:
    """The lines of the new environment, and what it sets (for the round trip)."""

    lines: list[str] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)

    def comment(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def assign(self, name: str, value: str, source: str, note: str) -> None:
        """``name=value`` from ``source``, unless an earlier old name set it already."""
        if name in self.values:
            self.comment(f"{source}: not used, {name} is set above")
            return
        self.comment(f"{source} -> {name}: {note}")
        self.lines.append(env_line(name, value))
        self.values[name] = value


def _checked(name: str, value: str, source: str) -> str:
    """``value`` if the new setting ``name`` accepts it; a ConfigError naming both otherwise."""
    if name == "PGPORT" and not value.isdigit():
        raise ConfigError(f"{source}={value!r} cannot become PGPORT: it is not a port number")
    if not name.startswith(table.PREFIX):
        return value
    try:
        table.by_env(name).read({name: value})
        if name == table.SCHEMA.env:
            validate_schema(value)
    except ConfigError as exc:
        problem = str(exc).split(" ", 1)[1] if name != table.SCHEMA.env else str(exc)
        raise ConfigError(f"{source}={value!r} cannot become {name}: {problem}") from None
    return value


def _number(old: legacy.OldName, raw: str) -> float:
    try:
        return table.parse_float(raw)
    except ValueError as exc:
        raise ConfigError(f"{old.name}={raw!r} {exc}") from None


def _default_differs(old: legacy.OldName) -> str | None:
    """A comment for an old name left unset whose default is not the new one's, else None."""
    if old.new is None or not old.new.startswith(table.PREFIX) or not old.old_default:
        return None
    setting = table.by_env(old.new)
    new_default = setting.default
    try:
        same = float(old.old_default) == float(new_default)
    except (TypeError, ValueError):
        same = old.old_default == new_default
    if same:
        return None
    return (
        f"{old.name} unset: {legacy.possessive(old.system)} default was {old.old_default}, "
        f"{old.new}'s is {setting.shown_default.strip('`')}"
    )


def _workers(old: legacy.OldName, raw: str, out: Output) -> None:
    """The worker list (or count) as queue-engine's processes: up, systemd, compose."""
    if old.name == "WORKERS_JSON":
        counts = legacy.parse_workers_json(raw, old.name)
        if not counts:
            out.comment(f"{old.name}: every concurrency is 0: no workers to run")
            return
        flags = " ".join(f"--queue {q}={n}" for q, n in counts.items())
        out.comment(f"{old.name}: {old.note}")
        out.comment(f"  queue-ctl up reads WORKERS_JSON as it is, or: queue-ctl up {flags}")
    else:
        try:
            n = int(raw)
        except ValueError:
            raise ConfigError(f"{old.name}={raw!r} is not a whole number") from None
        if n < 1:
            raise ConfigError(f"{old.name}={raw!r} must be at least 1")
        counts = {"QUEUE": n}
        out.comment(f"{old.name}={n}: {old.note}")
    units = " ".join(
        f"queue-claim-worker@{q}:" + ("1" if n == 1 else f"{{1..{n}}}") + ".service"
        for q, n in counts.items()
    )
    out.comment(f"  systemd: systemctl enable --now {units}")
    for queue, n in counts.items():
        out.comment(
            f'  compose: a service with command ["--queue={queue}"] and deploy.replicas: {n}'
        )


def translate(system: str, environ: Mapping[str, str], db_url_env: str | None = None) -> Output:
    """The new environment for ``system``'s settings found in ``environ``."""
    out = Output()
    out.comment(
        f"queue-engine settings translated from {legacy.possessive(system)} "
        "by queue-ctl migrate-settings"
    )
    out.comment("(comments say what has no counterpart, what changed and which defaults differ)")
    separate_queue_db = bool(environ.get("DL_DB_DSN")) and system == legacy.DATALOADER
    hooks = []
    for old in legacy.entries(system):
        if old.form == "hook":
            hooks.append(old)
            continue
        names = [old.name]
        if old.form == "family":
            names = sorted(n for n in environ if environ[n] and legacy.lookup(n) is old)
        elif old.name == "AI_LEADS_DB_URL" and db_url_env and db_url_env != old.name:
            names = [db_url_env]
            if environ.get(old.name):
                out.comment(f"{old.name}: not used, --db-url-env names {db_url_env}")
        for name in names:
            _one(old, name, environ, out, separate_queue_db)
    if hooks:
        out.comment(f"{legacy.possessive(system)} settings in code (not in the environment):")
        for hook in hooks:
            out.comment(f"  {hook.name}: {hook.note}")
    return out


def _one(
    old: legacy.OldName,
    name: str,
    environ: Mapping[str, str],
    out: Output,
    separate_queue_db: bool,
) -> None:
    """Translate one old variable (``name``, an instance of ``old``) into ``out``."""
    raw = environ.get(name, "")
    source = name if name == old.name else f"{name} ({old.name} by configure(db_url_env=...))"
    if not raw:
        differs = _default_differs(old)
        if differs is not None:
            out.comment(differs)
        return
    if separate_queue_db and old.name in legacy.MAIN_DB_NAMES:
        out.comment(f"{name}: not carried over: DL_DB_DSN names the queue's database")
        return
    if old.translate == "workers":
        _workers(old, raw, out)
        return
    if old.new is None or old.translate == "none":
        out.comment(f"{name}: no counterpart: {old.note}")
        return
    if old.translate == "dsn":
        uri, changes = libpq_uri(raw, name)
        note = "; ".join(changes) if changes else "the same URL"
        out.assign(old.new, uri, source, note)
    elif old.translate == "ceil":
        seconds = _number(old, raw)
        whole = str(math.ceil(seconds))
        note = old.note if float(whole) == seconds else f"{raw} rounded up to {whole}; {old.note}"
        out.assign(old.new, _checked(old.new, whole, name), name, note)
    elif old.translate == "bool_debug":
        word = raw.strip().lower()
        if word not in _TRUE | _FALSE:
            raise ConfigError(f"{name}={raw!r} is not a boolean (true or false)")
        if word in _TRUE:
            out.assign(old.new, "DEBUG", name, old.note)
        else:
            out.comment(f"{name}={raw}: nothing to set (the log level stays INFO)")
    elif old.translate == "pool":
        _pool(old, raw, environ.get("PG_MAX_OVERFLOW", ""), out)
    else:
        out.assign(old.new, _checked(old.new, raw, name), source, old.note)


def _pool(old: legacy.OldName, raw: str, overflow_raw: str, out: Output) -> None:
    """dataloader's pool size plus its overflow: queue-web's pool grows to its size on demand."""
    assert old.new is not None
    size = _whole(old.name, raw)
    overflow = _whole("PG_MAX_OVERFLOW", overflow_raw) if overflow_raw else 0
    total = str(size + overflow)
    note = old.note if not overflow else f"{size} + {overflow} overflow = {total}; {old.note}"
    out.assign(old.new, _checked(old.new, total, old.name), old.name, note)


def _whole(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None


@click.command("migrate-settings")
@click.option(
    "--from",
    "system",
    required=True,
    type=click.Choice(legacy.SYSTEMS),
    help="The system whose settings to translate.",
)
@click.option(
    "--env-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also read this dotenv file, as the old system did (the environment wins over it).",
)
@click.option(
    "--db-url-env",
    metavar="NAME",
    help="queue_workflows: the DSN variable its configure(db_url_env=...) named "
    "(default AI_LEADS_DB_URL).",
)
def migrate_settings(system: str, env_file: Path | None, db_url_env: str | None) -> None:
    """Print the environment of queue-engine translated from dataloader's, pqrun's or queue_workflows'.

    Reads the variables the old system read, from the environment and from
    --env-file (the environment wins, as in pydantic-settings), and prints
    QUEUE_ENGINE_* lines (and libpq PG* lines, PG_HOST -> PGHOST) as an
    environment file, with a comment line for every old name that has no
    counterpart, every value that had to change and every default that
    differs. A value the new setting refuses is one line on stderr, exit 2.

    The output holds secrets (a password inside a DSN): it is meant to become
    an environment file readable by the service alone. Nothing is logged.

    \b
      queue-ctl migrate-settings --from dataloader --env-file .env > queue-engine.env
    """
    if db_url_env is not None and system != legacy.QUEUE_WORKFLOWS:
        raise click.UsageError("--db-url-env is for --from queue_workflows")
    if db_url_env is not None and not _NAME.fullmatch(db_url_env):
        raise click.BadParameter(
            f"{db_url_env!r} is not a variable name", param_hint="--db-url-env"
        )
    environ = {**(read_env_file(env_file) if env_file else {}), **os.environ}
    out = translate(system, environ, db_url_env)
    click.echo("\n".join(out.lines))
