"""The settings of the three systems queue-engine replaces, and what each became.

Why this module is long: most of it is the table, one entry per old name with
its note, which the notice, the command and the reference page all read; cut
in pieces, those three would drift apart.

One table, as data, read by two things: the start-up notice every console
script prints when it finds one of these names in its environment
(:func:`notices`), and ``queue-ctl migrate-settings --from SYSTEM``, which
translates their values into ``QUEUE_ENGINE_*`` (and libpq ``PG*``) variables.
``docs/reference/configuration.md`` shows the same table (:func:`markdown_table`
writes it; a test holds the page to it).

The names come from the systems' own documents: dataloader's README and
overview (its ``config.py`` settings: ``APP_*``, ``LOG_*``, ``PG_*``, ``DL_*``,
``WORKERS_JSON``), pqrun's design document (``WORKER_*`` and the keywords of
``Worker(...)``) and queue_workflows' notes (``AI_LEADS_*`` and the keywords of
``configure(...)``). Each entry has a counterpart (``new``) or a reason there
is none (``note``); ``tests/unit/test_legacy_settings.py`` holds every name of
those documents to having one or the other.

Old names are noticed, never read as values: see :func:`notices` for why.

This module imports only the settings table and the errors, and builds nothing at import
but the table itself, so the notice costs a console script a scan of its
environment's names against a frozenset.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import ConfigError

DATALOADER = "dataloader"
PQRUN = "pqrun"
QUEUE_WORKFLOWS = "queue_workflows"
#: The systems ``migrate-settings --from`` knows, in the order the docs list them.
SYSTEMS = (DATALOADER, PQRUN, QUEUE_WORKFLOWS)

#: How ``migrate-settings`` turns an old value into a new one (``cli/migrate_settings.py``):
#: ``copy`` the text (checked against the new setting), ``dsn`` a database URL rewritten
#: as a libpq URI, ``ceil`` a number of seconds rounded up to whole seconds, ``bool_debug``
#: a pydantic boolean turned into a log level, ``pool`` the pool size plus its overflow,
#: ``workers`` the worker list shown as processes, ``none`` nothing (the note says why).
Translate = Literal["copy", "dsn", "ceil", "bool_debug", "pool", "workers", "none"]
#: ``env``: an environment variable; ``family``: every variable starting with ``name``;
#: ``hook``: a keyword argument of the old system's code (``configure(db_url_env=...)``),
#: which no environment shows, explained by ``migrate-settings`` in comment lines.
Form = Literal["env", "family", "hook"]


@dataclass(frozen=True, slots=True)
class OldName:
    """One setting of an old system and what became of it."""

    system: str
    name: str
    #: The default the old system's documents give ("" when they give none).
    old_default: str
    #: The variable that took its place (``QUEUE_ENGINE_*`` or libpq's ``PG*``), or None.
    new: str | None
    #: What differs, or why there is no counterpart: one line, shown in notices and comments.
    note: str
    translate: Translate = "copy"
    form: Form = "env"
    #: False for names too common to be this system's for sure (``DEBUG``): migrate-settings
    #: still translates them, but a daemon does not remark on them at start.
    notice: bool = True


def _dl(name: str, default: str, new: str | None, note: str, **more: object) -> OldName:
    return OldName(DATALOADER, name, default, new, note, **more)  # type: ignore[arg-type]


def _pq(name: str, default: str, new: str | None, note: str, **more: object) -> OldName:
    return OldName(PQRUN, name, default, new, note, **more)  # type: ignore[arg-type]


def _qw(name: str, default: str, new: str | None, note: str, **more: object) -> OldName:
    return OldName(QUEUE_WORKFLOWS, name, default, new, note, **more)  # type: ignore[arg-type]


_LOGS = (
    "the daemons log to stderr, which journald or the container runtime keeps and rotates; "
    f"{table.LOG_FORMAT.env}=json writes one JSON object per line"
)
_METRICS = (
    "metrics are served to Prometheus by queue-orchestrator "
    f"({table.HTTP_PORT.env}), not written to files"
)
_AUDIT = "the audit trail is the job_events table (every transition): queue-ctl show JOB_ID"
_LIBPQ = "libpq's own name (no underscore)"
_MAIN_DB = "; with DL_DB_DSN set it named the application's database, not the queue's"

#: dataloader's connection variables: they named its main database, and its queue's
#: unless ``DL_DB_DSN`` named another (then they are not the queue's and are not carried over).
MAIN_DB_NAMES = frozenset({"PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DATABASE"})

#: Every old name, system by system, in the order of their documents.
OLD_NAMES: tuple[OldName, ...] = (
    # dataloader: AppSettings, LogSettings, PGSettings, WorkerSettings (README, overview).
    _dl(
        "APP_HOST",
        "0.0.0.0",  # noqa: S104 - the old default, quoted, never bound
        table.WEB_HOST.env,
        "queue-web listens on loopback (127.0.0.1) unless told; put TLS in front of 0.0.0.0",
    ),
    _dl("APP_PORT", "8081", table.WEB_PORT.env, "queue-web's default port is 8080"),
    _dl(
        "TIMEZONE",
        "Europe/Moscow",
        None,
        "no process-wide time zone: each schedule names its own "
        "(queue-ctl schedules add --tz, @periodic(tz=...)); times are stored with their zone",
    ),
    _dl(
        "DEBUG",
        "False",
        table.LOG_LEVEL.env,
        f"true becomes DEBUG; {table.DEBUG.env} is another thing (tracebacks of unexpected errors)",
        translate="bool_debug",
        notice=False,
    ),
    _dl(
        "LOCAL",
        "False",
        None,
        "no local mode: queue-ctl up runs the whole fleet on an embedded Postgres",
        translate="none",
        notice=False,
    ),
    _dl("LOG_PATH", "", None, _LOGS, translate="none"),
    _dl("LOG_FILE_NAME", "", None, _LOGS, translate="none"),
    _dl("LOG_ROTATION", "", None, _LOGS, translate="none"),
    _dl("METRIC_PATH", "", None, _METRICS, translate="none"),
    _dl("METRIC_FILE_NAME", "", None, _METRICS, translate="none"),
    _dl("AUDIT_LOG_PATH", "", None, _AUDIT, translate="none"),
    _dl("AUDIT_LOG_FILE_NAME", "", None, _AUDIT, translate="none"),
    _dl("PG_HOST", "", "PGHOST", _LIBPQ + _MAIN_DB),
    _dl("PG_PORT", "", "PGPORT", _LIBPQ + _MAIN_DB),
    _dl("PG_USER", "", "PGUSER", _LIBPQ + _MAIN_DB),
    _dl("PG_PASSWORD", "", "PGPASSWORD", _LIBPQ + _MAIN_DB),
    _dl("PG_DATABASE", "", "PGDATABASE", _LIBPQ + _MAIN_DB),
    _dl(
        "PG_SCHEMA_QUEUE",
        "",
        table.SCHEMA.env,
        "the engine's tables (jobs, job_events, ...) go in this schema; their names do not "
        "collide with dl_jobs",
    ),
    _dl(
        "PG_SCHEMA",
        "",
        table.SCHEMA.env,
        "used only when PG_SCHEMA_QUEUE is unset (older dataloader versions named the queue's "
        "schema so)",
    ),
    _dl(
        "PG_USE_POOL",
        "",
        None,
        "each daemon holds its own connection; queue-web always uses a pool",
        translate="none",
    ),
    _dl(
        "PG_POOL_SIZE",
        "",
        table.WEB_POOL_SIZE.env,
        "queue-web's pool grows from 1 to this size on demand, so it takes the pool size plus "
        "PG_MAX_OVERFLOW; workers hold one connection each",
        translate="pool",
    ),
    _dl(
        "PG_MAX_OVERFLOW",
        "",
        None,
        f"no overflow: queue-web's pool grows to {table.WEB_POOL_SIZE.env}, "
        "which migrate-settings sets to PG_POOL_SIZE plus this",
        translate="none",
    ),
    _dl(
        "PG_POOL_RECYCLE",
        "",
        None,
        "no setting: queue-web's pool replaces each connection after an hour, and checks one "
        "before a request gets it",
        translate="none",
    ),
    _dl(
        "PG_CONNECT_TIMEOUT",
        "",
        "PGCONNECT_TIMEOUT",
        "libpq's, whole seconds; the engine's own 10 s applies only where neither the DSN "
        "nor PGCONNECT_TIMEOUT sets one",
        translate="ceil",
    ),
    _dl(
        "PG_COMMAND_TIMEOUT",
        "",
        None,
        "no statement timeout: the engine's statements are short, and "
        "PGOPTIONS='-c statement_timeout=...' would also cut migrations short",
        translate="none",
    ),
    _dl(
        "DL_DB_DSN",
        "",
        table.DSN.env,
        "a SQLAlchemy URL (postgresql+asyncpg://) becomes a libpq URI (postgresql://)",
        translate="dsn",
    ),
    _dl(
        "WORKERS_JSON",
        "",
        None,
        "queue-ctl up reads it (or --workers-json); elsewhere one queue-claim-worker process "
        "per unit of concurrency (systemd queue-claim-worker@QUEUE:N, compose replicas)",
        translate="workers",
    ),
    _dl("DL_HEARTBEAT_SEC", "10", table.HEARTBEAT_S.env, "same meaning and default"),
    _dl(
        "DL_DEFAULT_LEASE_TTL_SEC",
        "60",
        table.LEASE_TTL_S.env,
        "same meaning and default; whole seconds",
        translate="ceil",
    ),
    _dl(
        "DL_REAPER_PERIOD_SEC",
        "10",
        table.SWEEP_S.env,
        "read by queue-orchestrator, whose leader reaps; default 5",
    ),
    _dl(
        "DL_CLAIM_BACKOFF_SEC",
        "15",
        None,
        "not needed: a job whose lock_key is busy is skipped by the claim and waits, spending "
        "no attempt, until its key's running job finishes; the idle wait it also set is "
        f"{table.POLL_S.env} (default 1, spread over a queue's idle workers)",
        translate="none",
    ),
    # pqrun: environment variables (design document, 8.1) and Worker(...) keywords (8.2).
    _pq(
        "WORKER_ENABLED",
        "true",
        None,
        "workers are processes: run queue-claim-worker where it was true, none where false; "
        f"beside an app, WorkerProcesses starts none with {table.WORKERS_BESIDE.env}=off",
        translate="none",
    ),
    _pq(
        "WORKER_CONCURRENCY",
        "1",
        None,
        "one job per process: run this many queue-claim-worker processes per replica "
        "(queue-ctl up --queue QUEUE=N, systemd queue-claim-worker@QUEUE:{1..N})",
        translate="workers",
    ),
    _pq(
        "WORKER_REAP_INTERVAL",
        "60",
        table.SWEEP_S.env,
        "read by queue-orchestrator, whose leader reaps (the workers do not); default 5",
    ),
    _pq(
        "WORKER_STALE_TIMEOUT",
        "1200",
        table.DEFAULT_TIMEOUT_S.env,
        "a crashed worker's job comes back when its lease lapses "
        f"({table.LEASE_TTL_S.env}, renewed while it runs), so a long job is never run twice; "
        "what is left is a cap on a job's run time, the watchdog's budget (default 3600)",
    ),
    _pq("dsn", "", table.DSN.env, "PgJobStore(dsn=...): the same libpq URI", form="hook"),
    _pq(
        "concurrency",
        "1",
        None,
        "Worker(concurrency=N): N queue-claim-worker processes",
        form="hook",
        translate="none",
    ),
    _pq(
        "enabled",
        "True",
        None,
        "Worker(enabled=...): run queue-claim-worker processes or not",
        form="hook",
        translate="none",
    ),
    _pq(
        "idle_policy",
        "1/2/5/10 s",
        table.POLL_S.env,
        "Worker(idle_policy=...): workers LISTEN and wake at once; the safety poll "
        f"is {table.POLL_S.env}, spread by {table.QUEUE_POLL_RATE.env}",
        form="hook",
        translate="none",
    ),
    _pq(
        "backoff",
        "1m/5m/30m/2h/6h",
        None,
        "Worker(backoff=...): a retry policy per task (@task(retry=...))",
        form="hook",
        translate="none",
    ),
    _pq(
        "loop_error_policy",
        "0 s",
        table.RECONNECT_MAX_S.env,
        "Worker(loop_error_policy=...): reconnects back off from 0.2 s, doubling, jittered, "
        "up to this cap",
        form="hook",
        translate="none",
    ),
    _pq(
        "reap_stale_every_seconds",
        "60",
        table.SWEEP_S.env,
        "Worker(reap_stale_every_seconds=...): as WORKER_REAP_INTERVAL",
        form="hook",
        translate="none",
    ),
    _pq(
        "default_stale_after",
        "20 min",
        table.DEFAULT_TIMEOUT_S.env,
        "Worker(default_stale_after=...): as WORKER_STALE_TIMEOUT",
        form="hook",
        translate="none",
    ),
    _pq(
        "worker_id",
        "hostname-pid",
        None,
        "Worker(worker_id=...): a worker's id is host:pid:random, not configurable",
        form="hook",
        translate="none",
    ),
    # queue_workflows: the ai_leads defaults and the configure(...) keywords (its notes).
    _qw(
        "AI_LEADS_DB_URL",
        "",
        table.DSN.env,
        "the database URL (another name if configure(db_url_env=...) set one: "
        "migrate-settings --db-url-env NAME)",
        translate="dsn",
    ),
    _qw(
        "QUEUE_WORKFLOWS_TEST_DB_URL",
        "",
        table.TEST_DSN.env,
        "the test suite's server; ours creates its own databases, so the role must be able to",
        translate="dsn",
    ),
    _qw(
        "AI_LEADS_DISABLE_",
        "",
        None,
        "test gates of queue_workflows' own suite: nothing to carry over",
        translate="none",
        form="family",
    ),
    _qw(
        "AI_LEADS_",
        "",
        None,
        "a runtime knob of queue_workflows' ai_leads defaults: no counterpart by name; the "
        "queue_workflows migration guide maps its features",
        translate="none",
        form="family",
    ),
    _qw(
        "db_url_env",
        "AI_LEADS_DB_URL",
        table.DSN.env,
        "configure(db_url_env=NAME): pass migrate-settings --db-url-env NAME to read it",
        form="hook",
        translate="none",
    ),
    _qw(
        "container_prefix",
        "ai_leads-",
        None,
        "configure(container_prefix=...): no cgroup attribution by container name; each "
        "process's RSS and CPU are in the workers table (queue-ctl workers)",
        form="hook",
        translate="none",
    ),
    _qw(
        "ingest_queues",
        "fetch, load",
        None,
        "configure(ingest_queues=...): any queue name works, no allow-list, cpu and gpu "
        "included; run queue-claim-worker --queue NAME",
        form="hook",
        translate="none",
    ),
    _qw(
        "ingest_default_budget_s",
        "3600",
        table.DEFAULT_TIMEOUT_S.env,
        "configure(ingest_default_budget_s=...): the wall-clock budget of a job whose task sets "
        "none (same default)",
        form="hook",
        translate="none",
    ),
)

#: Variables by exact name (the ``env`` entries).
BY_NAME: dict[str, OldName] = {o.name: o for o in OLD_NAMES if o.form == "env"}
#: Families by prefix, longest first, so ``AI_LEADS_DISABLE_X`` is a test gate.
FAMILIES: tuple[OldName, ...] = tuple(
    sorted((o for o in OLD_NAMES if o.form == "family"), key=lambda o: -len(o.name))
)
#: The names a start-up notice looks for.
NOTICED: frozenset[str] = frozenset(o.name for o in BY_NAME.values() if o.notice)
_FAMILY_PREFIXES = tuple(o.name for o in FAMILIES)


def possessive(system: str) -> str:
    """``dataloader's``, ``queue_workflows'``."""
    return f"{system}'" if system.endswith("s") else f"{system}'s"


def entries(system: str) -> tuple[OldName, ...]:
    """The old names of one system, in document order."""
    return tuple(o for o in OLD_NAMES if o.system == system)


def lookup(name: str) -> OldName | None:
    """The entry for a variable name: exact, else its family; None if no system used it."""
    found = BY_NAME.get(name)
    if found is not None:
        return found
    if name.startswith(_FAMILY_PREFIXES):
        return next(f for f in FAMILIES if name.startswith(f.name))
    return None


def notice_line(name: str, old: OldName) -> str:
    """One notice: whose name this is, what queue-engine reads instead, and the command."""
    if old.new is not None and old.translate != "none":
        reads = f"queue-engine reads {old.new}"
    else:
        reads = f"queue-engine does not read it: {old.note}"
    return f"{name} is {possessive(old.system)} name; {reads} (queue-ctl migrate-settings --from {old.system})"


def notices(environ: Mapping[str, str], reads: Iterable[str] = ()) -> Iterator[str]:
    """A notice line per old system's variable set in ``environ`` and not in ``reads``.

    Old names are noticed, not honoured. Honouring them (aliases) would let
    another system's variables left in an environment change a daemon
    silently: during a cut-over both systems often run side by side from one
    environment file, and dataloader's ``APP_PORT=8081`` would move queue-web
    onto the port dataloader still holds; a name one underscore away from
    libpq's (``PG_HOST`` beside ``PGHOST``) would make two names for one
    thing, each winning in some process; and some old names mean something
    else here (``WORKER_STALE_TIMEOUT``, a SQLAlchemy URL in ``DL_DB_DSN``).
    ``queue-ctl migrate-settings`` translates them once, visibly.

    A name set to the empty string counts as unset, as it does for every setting.
    """
    skip = frozenset(reads)
    for name in sorted(environ):
        if name in skip or not environ[name]:
            continue
        if name in NOTICED or name.startswith(_FAMILY_PREFIXES):
            old = lookup(name)
            if old is not None:
                yield notice_line(name, old)


def markdown_table(system: str) -> str:
    """The reference page's table of one system: old name, new name and default, what differs."""
    rows = ["| old name | queue-engine | note |", "|---|---|---|"]
    for old in entries(system):
        shown = f"`{old.name}`" if old.form != "hook" else f"`{old.name}=` (code)"
        if old.form == "family":
            shown = f"`{old.name}*`"
        if old.old_default:
            shown += f" ({old.old_default})"
        if old.new is None:
            new = "—"
        elif old.new.startswith(table.PREFIX):
            new = f"`{old.new}` ({table.by_env(old.new).shown_default.strip('`')})"
        else:
            new = f"`{old.new}` (libpq)"
        rows.append(f"| {shown} | {new} | {old.note} |")
    return "\n".join(rows)


#: Keys of one entry of dataloader's ``WORKERS_JSON``.
WORKER_KEYS = ("queue", "concurrency")


def parse_workers_json(raw: str, where: str = "WORKERS_JSON") -> dict[str, int]:
    """dataloader's worker list as workers per queue: ``{"load.cbr": 2}``.

    ``[{"queue": "load.cbr", "concurrency": 2}, ...]``: dataloader started
    ``concurrency`` async workers per entry, so two entries of one queue add
    up; ``concurrency`` left out is 1, and 0 runs none of that queue. An
    unknown key (``concurency``) is refused rather than read as 1. Anything
    wrong raises a one-line ConfigError naming ``where`` (exit 2).
    """
    import json

    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where} is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(data, list):
        raise ConfigError(
            f'{where} must be a JSON list such as [{{"queue": "load.cbr", "concurrency": 2}}]'
        )
    counts: dict[str, int] = {}
    for number, entry in enumerate(data, start=1):
        at = f"{where} entry {number}"
        if not isinstance(entry, dict):
            raise ConfigError(f'{at} must be an object such as {{"queue": "q", "concurrency": 1}}')
        unknown = sorted(set(entry) - set(WORKER_KEYS))
        if unknown:
            raise ConfigError(f"{at}: unknown key {unknown[0]!r} (known: queue, concurrency)")
        queue = entry.get("queue")
        if not isinstance(queue, str) or not queue.strip():
            raise ConfigError(f"{at}: 'queue' must be a queue name")
        concurrency = entry.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 0:
            raise ConfigError(f"{at}: 'concurrency' must be a whole number >= 0")
        counts[queue.strip()] = counts.get(queue.strip(), 0) + concurrency
    return {queue: n for queue, n in counts.items() if n > 0}
