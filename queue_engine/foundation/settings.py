"""Every ``QUEUE_ENGINE_*`` setting in one declarative table.

Why this module is long: it *is* the one table of every ``QUEUE_ENGINE_*``
variable (about 150 lines of machinery, then one declaration per setting with
its docs); splitting it by process would bring back the disagreements between
daemons that it exists to prevent.

Each :class:`Setting` says once what a variable is: its name, how its text is
parsed, its default, its bounds or choices, which processes read it, the
command-line option that overrides it (if any) and a one-line description.
The settings objects (``WorkerSettings.from_env``, ``OrchestratorSettings.from_env``,
``SchedulerSettings.from_env``, the pruner's ``Retention.from_env``), the views'
dead-worker threshold and the click options all read their defaults and
bounds from here, so one variable cannot mean two things in two processes
(it did: ``QUEUE_ENGINE_RECONNECT_MAX_S`` defaulted to 10 s in the
orchestrator, 5 s in the scheduler and was ignored by the worker).
``docs/reference/configuration.md`` is checked against this table by a test.

Values are checked when read: a bad value raises a one-line
:class:`~queue_engine.foundation.errors.ConfigError` naming the variable (exit code 2),
so a typo stops a daemon at start rather than at the first job.

This module imports only :mod:`queue_engine.foundation.errors`, so any layer may use it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from queue_engine.foundation.errors import ConfigError

PREFIX = "QUEUE_ENGINE_"

#: The readers named in the table's ``read_by`` (and in the doc's "read by" column).
LIBRARY = "library"
CTL = "queue-ctl"
WORKER = "queue-claim-worker"
ORCHESTRATOR = "queue-orchestrator"
SCHEDULER = "queue-scheduler"
WEB = "queue-web"
TESTS = "tests"
PROCESSES = (LIBRARY, CTL, WORKER, ORCHESTRATOR, SCHEDULER, WEB, TESTS)
DAEMONS = (WORKER, ORCHESTRATOR, SCHEDULER)
COMMANDS = (CTL, *DAEMONS)
EVERYWHERE = (LIBRARY, *COMMANDS)

#: A worker counts as dead after this many missed heartbeats, unless
#: ``QUEUE_ENGINE_DEAD_AFTER_S`` says otherwise (the sweep and the views agree).
DEAD_AFTER_BEATS = 3

T = TypeVar("T")


def parse_text(raw: str) -> str:
    """Text as given."""
    return raw


def parse_float(raw: str) -> float:
    """A finite number (``inf`` and ``nan`` would pass every bound check)."""
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("is not a number") from None
    if not math.isfinite(value):
        raise ValueError("is not a finite number")
    return value


def parse_int(raw: str) -> int:
    """A whole number (``60`` or ``60.0``, not ``1.5``)."""
    try:
        return int(raw)
    except ValueError:
        value = parse_float(raw)
    if value != int(value):
        raise ValueError("is not a whole number")
    return int(value)


#: Seconds per unit of a duration (``90s``, ``30m``, ``12h``, ``2d``, ``2w``; no unit: seconds).
DURATION_UNITS_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The grammar of a duration in words, for help texts and error messages.
DURATION_FORMS = "seconds, or a number followed by s, m, h, d or w (90s, 30m, 12h, 2d, 2w)"
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_duration(raw: str) -> float:
    """Seconds from ``90``, ``90s``, ``1.5m``, ``30m``, ``12h``, ``2d`` or ``2w``.

    The one grammar of every duration the engine reads: a setting such as
    ``QUEUE_ENGINE_MAX_AGE`` and every command-line option that takes one
    (``queue-claim-worker --max-age``, ``queue-ctl prune --older-than``,
    ``queue-ctl list --older-than``), so a value that one accepts the others
    accept too. Limits and retentions are hours to weeks long, which an
    operator writes as ``12h`` or ``2w`` rather than ``43200``; plain seconds
    still work. A bad value raises ValueError with the rest of a sentence
    (``is not a duration: use ...``) for the caller to prefix with what was read.
    """
    match = _DURATION_RE.match(raw)
    if match is None or match.group(2).lower() not in DURATION_UNITS_S:
        raise ValueError(f"is not a duration: use {DURATION_FORMS}")
    return float(match.group(1)) * DURATION_UNITS_S[match.group(2).lower()]


def _format_number(value: float) -> str:
    """``10`` rather than ``10.0``; ``2592000`` rather than ``2.592e+06``."""
    if isinstance(value, int) or value == int(value):
        return str(int(value))
    return repr(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting(Generic[T]):
    """One ``QUEUE_ENGINE_<name>`` variable.

    ``minimum``/``maximum`` bound a number (inclusive) or the length of a
    text; ``zero_is_off`` lets ``0`` through below the minimum (it turns the
    feature off). ``default_text`` replaces the shown default where the
    default is computed (``3 x QUEUE_ENGINE_HEARTBEAT_S``) or "required".
    """

    name: str
    default: T
    parse: Callable[[str], T]
    read_by: tuple[str, ...]
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    zero_is_off: bool = False
    choices: tuple[str, ...] = ()
    option: str | None = None
    default_text: str | None = None

    @property
    def env(self) -> str:
        """The variable's full name."""
        return PREFIX + self.name

    @property
    def shown_default(self) -> str:
        """The default as the docs show it."""
        if self.default_text is not None:
            return self.default_text
        if self.default is None or self.default == "":
            return "unset"
        if isinstance(self.default, str):
            return f"`{self.default}`"
        if isinstance(self.default, int | float):
            return _format_number(self.default)
        return str(self.default)

    def read(self, environ: Mapping[str, str] | None = None) -> T:
        """The variable's value (empty counts as unset: the default), checked."""
        env = os.environ if environ is None else environ
        raw = env.get(self.env, "")
        if raw == "":
            return self.default
        try:
            value = self.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{self.env}={raw!r} {exc}") from None
        return self.check(value, raw=raw)

    def check(self, value: T, *, raw: str | None = None) -> T:
        """Return ``value`` if it is within bounds, else raise a ConfigError naming the setting."""
        problem = self.problem(value)
        if problem is None:
            return value
        where = f"{self.env}={raw!r}" if raw is not None else self.env
        if raw is None and self.option is not None:
            where += f" ({self.option})"
        raise ConfigError(f"{where} {problem}")

    def problem(self, value: object) -> str | None:
        """What is wrong with ``value`` (None: nothing)."""
        if value is None:
            return None
        if self.choices:
            if value not in self.choices:
                return f"is not valid: use one of {', '.join(self.choices)}"
            return None
        if isinstance(value, str):
            return self._length_problem(len(value))
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "is not a number"
        if self.zero_is_off and value == 0:
            return None
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                bound = f"must be between {_format_number(low)} and {_format_number(high)}"
            elif low is not None:
                bound = f"must be at least {_format_number(low)}"
            else:
                bound = f"must be at most {_format_number(high or 0)}"
            return bound + (" (or 0 to turn it off)" if self.zero_is_off else "")
        return None

    def _length_problem(self, length: int) -> str | None:
        low, high = self.minimum, self.maximum
        if (low is not None and length < low) or (high is not None and length > high):
            return (
                f"must be {_format_number(low or 0)} to {_format_number(high or 0)} characters long"
            )
        return None


def number(
    name: str, default: float, read_by: tuple[str, ...], doc: str, **bounds: Any
) -> Setting[float]:
    """A setting holding a number of seconds (or another float)."""
    return Setting(
        name=name, default=float(default), parse=parse_float, read_by=read_by, doc=doc, **bounds
    )


def optional_number(
    name: str, read_by: tuple[str, ...], doc: str, **bounds: Any
) -> Setting[float | None]:
    """A float setting whose default is computed from others (unset: None)."""
    return Setting(name=name, default=None, parse=parse_float, read_by=read_by, doc=doc, **bounds)


def integer(
    name: str, default: int, read_by: tuple[str, ...], doc: str, **bounds: Any
) -> Setting[int]:
    """A whole-number setting."""
    return Setting(name=name, default=default, parse=parse_int, read_by=read_by, doc=doc, **bounds)


def optional_integer(
    name: str, read_by: tuple[str, ...], doc: str, **bounds: Any
) -> Setting[int | None]:
    """A whole-number setting that is unset by default."""
    return Setting(name=name, default=None, parse=parse_int, read_by=read_by, doc=doc, **bounds)


def optional_duration(
    name: str, read_by: tuple[str, ...], doc: str, **bounds: Any
) -> Setting[float | None]:
    """A length of time in seconds, written as :func:`parse_duration` reads it; unset by default."""
    return Setting(
        name=name, default=None, parse=parse_duration, read_by=read_by, doc=doc, **bounds
    )


def text(name: str, default: str, read_by: tuple[str, ...], doc: str, **more: Any) -> Setting[str]:
    """A text setting with a default ("" means unset)."""
    return Setting(name=name, default=default, parse=parse_text, read_by=read_by, doc=doc, **more)


def optional_text(
    name: str, read_by: tuple[str, ...], doc: str, **more: Any
) -> Setting[str | None]:
    """A text setting that is unset by default."""
    return Setting(name=name, default=None, parse=parse_text, read_by=read_by, doc=doc, **more)


def choice(
    name: str,
    default: str,
    choices: tuple[str, ...],
    read_by: tuple[str, ...],
    doc: str,
    *,
    fold: Callable[[str], str] = str.lower,
    **more: Any,
) -> Setting[str]:
    """One of a fixed set of words; ``fold`` normalises the case of what was given."""
    return Setting(
        name=name,
        default=default,
        parse=lambda raw: fold(raw.strip()),
        choices=choices,
        read_by=read_by,
        doc=doc,
        **more,
    )


# -- every process --------------------------------------------------------------------

DSN = text(
    "DSN",
    "",
    (*EVERYWHERE, WEB),
    "database to connect to, as a libpq connection string or URI; unset: the running local "
    "fleet's (queue-ctl up) unless a PG* variable names a server, else libpq's defaults",
    option="--dsn",
)
RUNTIME_DIR = optional_text(
    "RUNTIME_DIR",
    (*EVERYWHERE, WEB),
    "folder of the local fleet's state file, which `queue-ctl up` writes and programs run "
    "without a DSN read",
    default_text="`$XDG_RUNTIME_DIR/queue-engine`, else `queue-engine-UID` in the temp folder",
)
SCHEMA = text(
    "SCHEMA",
    "queue_engine",
    (*EVERYWHERE, WEB),
    "Postgres schema holding the engine's tables, and prefix of its NOTIFY channels",
    option="--schema",
)
ACTOR = optional_text(
    "ACTOR",
    (LIBRARY, CTL),
    "who the audit of controls names for a change made by queue-ctl or the Python API "
    "(`queue-ctl audit`); never a secret",
    minimum=1,
    maximum=255,
    default_text="`user@host` of the OS user",
)
DEBUG = optional_text(
    "DEBUG",
    (*COMMANDS,),
    "any non-empty value prints the traceback of an unexpected error (exit 70)",
)
LOG_LEVEL = choice(
    "LOG_LEVEL",
    "INFO",
    ("DEBUG", "INFO", "WARNING", "ERROR"),
    (*DAEMONS, WEB),
    "log verbosity (the log goes to stderr)",
    fold=str.upper,
    option="--log-level",
)
LOG_FORMAT = choice(
    "LOG_FORMAT",
    "text",
    ("text", "json"),
    (*DAEMONS, WEB),
    "text, or one JSON object per line",
    option="--log-format",
)
LEGACY_NOTICE = choice(
    "LEGACY_NOTICE",
    "on",
    ("on", "off"),
    (*COMMANDS, WEB),
    "on: at start, one line on stderr per variable of dataloader, pqrun or queue_workflows "
    "found in the environment, naming the setting that took its place",
)

# -- shared by the daemons ------------------------------------------------------------

HEARTBEAT_S = number(
    "HEARTBEAT_S",
    10,
    (*DAEMONS, CTL),
    "seconds between heartbeats of a process's workers row (and a worker's lease renewals)",
    minimum=0.05,
)
CONNECT_RETRY_S = number(
    "CONNECT_RETRY_S",
    10,
    (*DAEMONS,),
    "how long start-up retries an unreachable database before exiting 69",
    minimum=0,
)
RECONNECT_MAX_S = number(
    "RECONNECT_MAX_S",
    10,
    (*DAEMONS,),
    "cap of the reconnect backoff after a lost database",
    minimum=0.1,
)

# -- queue-claim-worker ---------------------------------------------------------------

QUEUE = optional_text(
    "QUEUE", (WORKER,), "the queue the worker serves", option="--queue", default_text="required"
)
APP = optional_text(
    "APP",
    (WORKER, SCHEDULER),
    "module to import: the tasks a worker runs (required by queue-claim-worker), or the "
    "@periodic schedules queue-scheduler syncs into the schedules table at start",
    option="--app",
)
PREFETCH = integer(
    "PREFETCH",
    1,
    (WORKER,),
    "claimed jobs a worker holds at once (run one after another; outcomes flushed in batches)",
    minimum=1,
    maximum=1000,
    option="--prefetch",
)
POLL_S = number("POLL_S", 1.0, (WORKER,), "seconds between safety polls when idle", minimum=0.001)
QUEUE_POLL_RATE = number(
    "QUEUE_POLL_RATE",
    2,
    (WORKER,),
    "safety polls per second the idle workers of one queue make together: each polls every "
    "POLL_S x idle workers / this (never more often than POLL_S); 0: each every POLL_S",
    minimum=0.01,
    zero_is_off=True,
)
LEASE_TTL_S = integer(
    "LEASE_TTL_S",
    60,
    (WORKER,),
    "lease length of jobs whose lease_ttl_s is NULL",
    minimum=1,
    maximum=86400,
)
WORKER_SYNCHRONOUS_COMMIT = choice(
    "WORKER_SYNCHRONOUS_COMMIT",
    "off",
    ("on", "off", "local", "remote_write", "remote_apply"),
    (WORKER,),
    "synchronous_commit of the worker's own session",
)
WORKER_TELEMETRY_NOTIFY = choice(
    "WORKER_TELEMETRY_NOTIFY",
    "off",
    ("off", "on"),
    (WORKER,),
    "on: publish each heartbeat's host telemetry by NOTIFY (costly in big fleets)",
)
DEFAULT_TIMEOUT_S = number(
    "DEFAULT_TIMEOUT_S",
    3600,
    (WORKER,),
    "wall-clock budget of a job whose row and task set none (then exit 75)",
    minimum=0.001,
)
SHUTDOWN_GRACE_S = number(
    "SHUTDOWN_GRACE_S",
    30,
    (WORKER,),
    "how long the running job may go on after SIGTERM before it is given back",
    minimum=0,
)
CANCEL_GRACE_S = number(
    "CANCEL_GRACE_S",
    30,
    (WORKER,),
    "how long a running job may ignore its cancel (then exit 77)",
    minimum=0,
)
ZOMBIE_GRACE_S = number(
    "ZOMBIE_GRACE_S",
    10,
    (WORKER,),
    "how long a job whose lease was lost may run on (then exit 77)",
    minimum=0,
)
HARD_DEADLINE_GRACE_S = number(
    "HARD_DEADLINE_GRACE_S",
    10,
    (WORKER,),
    "past a job's budget, when the hard deadline ends a frozen worker (stack dump, exit 1)",
    minimum=1,
)
WARM_KEY = optional_text(
    "WARM_KEY",
    (WORKER,),
    "affinity key the worker starts warm for (a preloaded model, say): it prefers jobs "
    "naming it; after each job with an affinity key it is warm for that key",
    minimum=1,
    maximum=255,
    option="--warm-key",
)
AFFINITY_WAIT_S = number(
    "AFFINITY_WAIT_S",
    10,
    (WORKER,),
    "longest the warm preference may hold back the job at the head of the queue",
    minimum=0,
)
MAX_JOBS = optional_integer(
    "MAX_JOBS",
    (WORKER,),
    "recycle the worker after this many jobs: it finishes the job, gives back prefetched ones "
    "and exits 79, and its supervisor starts a fresh process; unset or 0: no limit",
    minimum=1,
    zero_is_off=True,
    option="--max-jobs",
)
MAX_RSS_MB = optional_integer(
    "MAX_RSS_MB",
    (WORKER,),
    "recycle the worker (exit 79) when its RSS, checked after each job, reaches this many MiB; "
    "unset or 0: no limit",
    minimum=1,
    zero_is_off=True,
    option="--max-rss",
)
MAX_AGE = optional_duration(
    "MAX_AGE",
    (WORKER,),
    f"recycle the worker (exit 79) between jobs once it has run this long: {DURATION_FORMS}; "
    "unset or 0: no limit. Each recycling limit is lowered by up to 10% at random, so that a "
    "fleet does not recycle at once",
    minimum=1,
    zero_is_off=True,
    option="--max-age",
)

# -- queue-orchestrator ----------------------------------------------------------------

SWEEP_S = number(
    "SWEEP_S",
    5,
    (ORCHESTRATOR,),
    "seconds between lease-reaper and dead-worker sweeps",
    minimum=0.05,
)
DEAD_AFTER_S = optional_number(
    "DEAD_AFTER_S",
    (ORCHESTRATOR, CTL, WORKER),
    "heartbeat age at which a worker counts as dead (sweep, stats, workers, metrics)",
    minimum=0.1,
    default_text=f"{DEAD_AFTER_BEATS} \N{MULTIPLICATION SIGN} `{HEARTBEAT_S.env}`",
)
RECOVERY_S = number(
    "RECOVERY_S",
    1,
    (ORCHESTRATOR,),
    "seconds between fast-recovery checks; 0 turns fast recovery off",
    minimum=0.05,
    zero_is_off=True,
)
ELECT_S = number("ELECT_S", 1, (ORCHESTRATOR,), "seconds between leadership checks", minimum=0.05)
PRUNE_S = number("PRUNE_S", 60, (ORCHESTRATOR,), "seconds between pruner runs", minimum=0.05)
ARCHIVE_AFTER_S = number(
    "ARCHIVE_AFTER_S",
    60,
    (ORCHESTRATOR,),
    "age at which succeeded jobs move from jobs to jobs_archive; 0 turns archiving off",
    minimum=1,
    zero_is_off=True,
)
ARCHIVE_S = number("ARCHIVE_S", 10, (ORCHESTRATOR,), "seconds between archiver runs", minimum=0.05)
VACUUM_DEAD_ROWS = integer(
    "VACUUM_DEAD_ROWS",
    5000,
    (ORCHESTRATOR,),
    "dead row versions in jobs at which the leader VACUUMs it (a job leaves two); 0 turns it off",
    minimum=100,
    zero_is_off=True,
)
VACUUM_S = number(
    "VACUUM_S", 1, (ORCHESTRATOR,), "seconds between the vacuumer's checks", minimum=0.05
)
WORKFLOW_CHECK_S = number(
    "WORKFLOW_CHECK_S",
    60,
    (ORCHESTRATOR,),
    "seconds between 'no stuck workflow node' checks; 0 turns the check off",
    minimum=0.05,
    zero_is_off=True,
)
RETAIN_SUCCEEDED_S = number(
    "RETAIN_SUCCEEDED_S",
    7 * 86400,
    (ORCHESTRATOR, CTL),
    "age at which succeeded jobs are pruned; 0 keeps them",
    minimum=0,
)
RETAIN_FAILED_S = number(
    "RETAIN_FAILED_S",
    30 * 86400,
    (ORCHESTRATOR, CTL),
    "age at which failed jobs are pruned; 0 keeps them",
    minimum=0,
)
RETAIN_LOST_S = number(
    "RETAIN_LOST_S",
    30 * 86400,
    (ORCHESTRATOR, CTL),
    "age at which lost jobs are pruned; 0 keeps them",
    minimum=0,
)
RETAIN_CANCELED_S = number(
    "RETAIN_CANCELED_S",
    30 * 86400,
    (ORCHESTRATOR, CTL),
    "age at which canceled jobs are pruned; 0 keeps them",
    minimum=0,
)
RETAIN_WORKERS_S = number(
    "RETAIN_WORKERS_S",
    86400,
    (ORCHESTRATOR, CTL),
    "age at which silent or stopped worker rows are pruned; 0 keeps them",
    minimum=0,
)
RETAIN_CONTROL_EVENTS_S = number(
    "RETAIN_CONTROL_EVENTS_S",
    90 * 86400,
    (ORCHESTRATOR, CTL),
    "age at which rows of the audit of controls (control_events) are pruned; 0 keeps them",
    minimum=0,
)
HTTP_PORT = optional_integer(
    "HTTP_PORT",
    (ORCHESTRATOR,),
    "serve Prometheus /metrics and /health on this port (needs queue-engine[metrics])",
    minimum=0,
    maximum=65535,
    option="--http-port",
)
HTTP_HOST = text(
    "HTTP_HOST",
    "127.0.0.1",
    (ORCHESTRATOR,),
    "address the metrics server binds to",
    option="--http-host",
)

# -- queue-scheduler ------------------------------------------------------------------

STATS_EXACT_CAP = integer(
    "STATS_EXACT_CAP",
    10_000,
    (LIBRARY, CTL, ORCHESTRATOR, WEB),
    "per-queue figures are exact up to this many jobs, estimated above (stats, top, metrics, queue-web)",
    minimum=1,
    maximum=10_000_000,
)
SCHEDULER_GRACE_S = number(
    "SCHEDULER_GRACE_S",
    60,
    (SCHEDULER,),
    "a due slot younger than this is still enqueued; an older one is missed",
    minimum=0,
)
SCHEDULER_POLL_S = number(
    "SCHEDULER_POLL_S",
    5,
    (SCHEDULER,),
    "longest sleep between two reads of the schedules table",
    minimum=0.05,
)
SCHEDULER_RUNS_KEEP_S = number(
    "SCHEDULER_RUNS_KEEP_S",
    86400,
    (SCHEDULER,),
    "how long per-slot records of schedule_runs are kept",
    minimum=60,
)

# -- queue-web ------------------------------------------------------------------------

WEB_HOST = text(
    "WEB_HOST",
    "127.0.0.1",
    (WEB,),
    "address queue-web listens on (loopback only unless changed)",
    option="--host",
)
WEB_PORT = integer(
    "WEB_PORT",
    8080,
    (WEB,),
    "port queue-web listens on",
    minimum=0,
    maximum=65535,
    option="--port",
)
WEB_READ_DSN = optional_text(
    "WEB_READ_DSN",
    (WEB,),
    "DSN of a read-only (monitor) role, used for requests of the read scope",
    option="--read-dsn",
)
WEB_PRODUCER_DSN = optional_text(
    "WEB_PRODUCER_DSN",
    (WEB,),
    "DSN of an enqueue-only (producer) role, used for requests of the producer scope",
    option="--producer-dsn",
)
WEB_TOKENS = optional_text(
    "WEB_TOKENS",
    (WEB,),
    "API bearer tokens: comma-separated scope:token pairs (scopes read, producer, operator)",
)
WEB_USERS = optional_text(
    "WEB_USERS",
    (WEB,),
    "dashboard logins: comma-separated name:scope:password entries",
)
WEB_ANONYMOUS = choice(
    "WEB_ANONYMOUS",
    "none",
    ("none", "read"),
    (WEB,),
    "scope of a request without credentials: none (refused) or read",
)
WEB_READ_ONLY = choice(
    "WEB_READ_ONLY",
    "off",
    ("off", "on"),
    (WEB,),
    "on: every credential is held to the read scope; nothing can be changed",
    option="--read-only",
)
WEB_API_EXPLORER = choice(
    "WEB_API_EXPLORER",
    "off",
    ("off", "on"),
    (WEB,),
    "on: serve the Swagger UI explorer at /docs (it loads its scripts from a CDN)",
)
WEB_SESSION_SECRET = optional_text(
    "WEB_SESSION_SECRET",
    (WEB,),
    "key signing login cookies; unset: a random key per process (logins end at restart)",
    minimum=16,
)
WEB_TRUSTED_ORIGINS = optional_text(
    "WEB_TRUSTED_ORIGINS",
    (WEB,),
    "comma-separated origins (https://ops.example.com) also allowed to send mutating requests",
)
WEB_POOL_SIZE = integer(
    "WEB_POOL_SIZE", 8, (WEB,), "database connections per pool", minimum=1, maximum=200
)
WEB_DB_TIMEOUT_S = number(
    "WEB_DB_TIMEOUT_S",
    5,
    (WEB,),
    "how long a request waits for a database connection before answering 503",
    minimum=0.1,
)
WEB_BULK_MAX = integer(
    "WEB_BULK_MAX",
    1000,
    (WEB,),
    "most jobs one bulk cancel or retry request acts on",
    minimum=1,
    maximum=100_000,
)

WEB_COMPAT = choice(
    "WEB_COMPAT",
    "off",
    ("off", "dataloader"),
    (WEB,),
    "off, or dataloader: answer the trigger, status and cancel routes, /health and /info as "
    "dataloader's HTTP API v1 did, and serve GET /status (docs/guides/web.md)",
    option="--compat",
)
WEB_COMPAT_ANONYMOUS = choice(
    "WEB_COMPAT_ANONYMOUS",
    "off",
    ("off", "on"),
    (WEB,),
    "on: a request without credentials may trigger, read and cancel jobs through the "
    "dataloader routes (only those); needs --compat dataloader and a loopback address",
)
WEB_COMPAT_ANONYMOUS_ANY_HOST = choice(
    "WEB_COMPAT_ANONYMOUS_ANY_HOST",
    "off",
    ("off", "on"),
    (WEB,),
    "on: allow QUEUE_ENGINE_WEB_COMPAT_ANONYMOUS on an address other machines can reach",
)
WEB_ENVIRONMENT = text(
    "WEB_ENVIRONMENT",
    "production",
    (WEB,),
    "the `environment` that /info and /status answer under --compat dataloader",
    minimum=1,
    maximum=64,
)

# -- an application's own worker processes ---------------------------------------------

WORKERS_BESIDE = choice(
    "WORKERS_BESIDE",
    "on",
    ("on", "off"),
    (LIBRARY,),
    "off: WorkerProcesses in an application starts no worker (they run elsewhere), "
    "as pqrun's WORKER_ENABLED=false",
)

# -- the test suite -------------------------------------------------------------------

TEST_DSN = optional_text(
    "TEST_DSN",
    (TESTS,),
    "admin DSN of a Postgres server for the test suite; unset: an embedded one",
)
DOCS_IMAGES = choice(
    "DOCS_IMAGES",
    "0",
    ("0", "1"),
    (TESTS,),
    "1: the browser tests also write the screenshots the docs show into docs/images/",
)


#: The table: every setting by name (without the prefix), in documentation order.
SETTINGS: dict[str, Setting[Any]] = {
    s.name: s
    for s in (
        DSN,
        RUNTIME_DIR,
        SCHEMA,
        ACTOR,
        DEBUG,
        LOG_LEVEL,
        LOG_FORMAT,
        LEGACY_NOTICE,
        HEARTBEAT_S,
        CONNECT_RETRY_S,
        RECONNECT_MAX_S,
        QUEUE,
        APP,
        PREFETCH,
        POLL_S,
        QUEUE_POLL_RATE,
        LEASE_TTL_S,
        WORKER_SYNCHRONOUS_COMMIT,
        WORKER_TELEMETRY_NOTIFY,
        DEFAULT_TIMEOUT_S,
        SHUTDOWN_GRACE_S,
        CANCEL_GRACE_S,
        ZOMBIE_GRACE_S,
        HARD_DEADLINE_GRACE_S,
        WARM_KEY,
        AFFINITY_WAIT_S,
        MAX_JOBS,
        MAX_RSS_MB,
        MAX_AGE,
        SWEEP_S,
        DEAD_AFTER_S,
        RECOVERY_S,
        ELECT_S,
        PRUNE_S,
        ARCHIVE_AFTER_S,
        ARCHIVE_S,
        VACUUM_DEAD_ROWS,
        VACUUM_S,
        WORKFLOW_CHECK_S,
        RETAIN_SUCCEEDED_S,
        RETAIN_FAILED_S,
        RETAIN_LOST_S,
        RETAIN_CANCELED_S,
        RETAIN_WORKERS_S,
        RETAIN_CONTROL_EVENTS_S,
        HTTP_PORT,
        HTTP_HOST,
        STATS_EXACT_CAP,
        SCHEDULER_GRACE_S,
        SCHEDULER_POLL_S,
        SCHEDULER_RUNS_KEEP_S,
        WEB_HOST,
        WEB_PORT,
        WEB_READ_DSN,
        WEB_PRODUCER_DSN,
        WEB_TOKENS,
        WEB_USERS,
        WEB_ANONYMOUS,
        WEB_READ_ONLY,
        WEB_API_EXPLORER,
        WEB_SESSION_SECRET,
        WEB_TRUSTED_ORIGINS,
        WEB_POOL_SIZE,
        WEB_DB_TIMEOUT_S,
        WEB_BULK_MAX,
        WORKERS_BESIDE,
        WEB_COMPAT,
        WEB_COMPAT_ANONYMOUS,
        WEB_COMPAT_ANONYMOUS_ANY_HOST,
        WEB_ENVIRONMENT,
        TEST_DSN,
        DOCS_IMAGES,
    )
}


def by_env(env: str) -> Setting[Any]:
    """The setting of a full variable name; a KeyError for one the table lacks."""
    if not env.startswith(PREFIX):
        raise KeyError(env)
    return SETTINGS[env.removeprefix(PREFIX)]


def read_fields(
    fields: Mapping[str, Setting[Any]], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Read the settings behind a config object's fields: ``{field: value}``."""
    return {field: setting.read(environ) for field, setting in fields.items()}


def check_fields(fields: Mapping[str, Setting[Any]], values: object) -> None:
    """Check the fields of a built config object against their settings' bounds."""
    for field, setting in fields.items():
        setting.check(getattr(values, field))


def dead_after_s(environ: Mapping[str, str] | None = None) -> float:
    """``QUEUE_ENGINE_DEAD_AFTER_S``, else three ``QUEUE_ENGINE_HEARTBEAT_S``.

    The dead-worker sweep (orchestrator) and the views (``queue-ctl stats``,
    ``workers``, ``top``, the metrics) both use this rule, so they agree on
    who is dead under any heartbeat.
    """
    explicit = DEAD_AFTER_S.read(environ)
    if explicit is not None:
        return explicit
    return DEAD_AFTER_BEATS * HEARTBEAT_S.read(environ)
