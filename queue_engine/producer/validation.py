"""Validation of enqueue options: every check runs before anything is written.

The same rules are CHECK constraints in the schema, so a plain SQL enqueue is
held to them too; checking here first gives the caller a clear message instead
of a constraint name.

Why this module is long: it holds every enqueue option's rule (names, ids,
keys, limits, weights, args, delays) and the one function that applies them
all (:func:`spec_from_options`), so a rule and the message that names it stay
together; every enqueue path (clients, CLI, HTTP, follow-ups, workflows)
imports its checks from here.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, NoReturn, Protocol, TypedDict, Unpack

from queue_engine.foundation.errors import ValidationError

QUEUE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")
TASK_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$")
MAX_ARGS_BYTES = 1024 * 1024
MAX_KEY_LENGTH = 255
#: Job and workflow ids are Postgres ``bigint``: 1 to 2^63-1. A larger number
#: names nothing, and a statement given one fails (``bigint out of range``).
ID_RANGE = (1, 2**63 - 1)
#: Text Postgres can store: anything but NUL (``text`` and ``jsonb`` refuse
#: it). A JSON Schema pattern too, for the HTTP API's OpenAPI document.
NO_NUL_PATTERN = r"^[^\x00]*$"
PRIORITY_RANGE = (0, 1000)
MAX_ATTEMPTS_RANGE = (1, 1000)
TIMEOUT_RANGE = (1, 7 * 24 * 3600)
LEASE_TTL_RANGE = (1, 24 * 3600)
#: A job's own limit of running jobs of its concurrency key (migration 0031).
CONCURRENCY_LIMIT_RANGE = (1, 10_000)
#: The tokens a job takes from its concurrency key's rate bucket (migration 0033).
WEIGHT_RANGE = (1, 100_000)
#: The longest delay: Postgres cannot add much more than this to now() (``interval
#: out of range`` past about 10^12 s), and that error would come from the
#: statement (for a follow-up, the worker's finish) instead of from the call.
MAX_DELAY_S = 10**11
#: The built-in defaults of a job whose task declares none: the same as the
#: database's ``builtin_task_defaults()`` (migration 0028), which applies them
#: on every enqueue path; tests/integration/test_task_defaults.py holds the two
#: together.
DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY = 100
DEFAULT_MAX_ATTEMPTS = 5
#: ``json.dumps`` with other than its default options builds a new encoder on
#: every call; one kept encoder saves a third of encoding a small ``args``.
_ARGS_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


class EnqueueOptions(TypedDict, total=False):
    """The options of one enqueue besides its task: the one list of them.

    ``Client.enqueue``, ``AsyncClient.enqueue`` and ``ctx.enqueue`` take them
    as keywords (``**options: Unpack[EnqueueOptions]``, PEP 692: a type
    checker still sees each keyword and its type); an ``enqueue_many`` item
    and a workflow node give them as keys; :data:`ENQUEUE_OPTIONS` is read
    from here. Every option may be left out, and None means left out. The
    HTTP API states them again as constrained fields for its OpenAPI document
    (``web/api/models.py``), and a unit test holds the two lists together.
    """

    #: Which workers may take the job; default: the task's, else ``"default"``.
    queue: str | None
    #: The handler's arguments, a JSON object (at most :data:`MAX_ARGS_BYTES` as JSON).
    args: dict[str, Any] | None
    #: Lower runs first (:data:`PRIORITY_RANGE`); default: the task's, else 100.
    priority: int | None
    #: Not before this time (timezone-aware); not together with ``delay``.
    run_at: datetime | None
    #: Not before now plus this many seconds (or a ``timedelta``).
    delay: float | timedelta | None
    #: Attempts before the job fails; default: the task's, else 5.
    max_attempts: int | None
    #: Wall-clock budget of one attempt; default: the task's, else the worker's.
    timeout_s: int | None
    #: Lease length of this job; default: the task's, else the worker's.
    lease_ttl_s: int | None
    #: A re-send with this key returns the job that holds it (any status).
    idempotency_key: str | None
    #: Unique among queued and running jobs: returns the active one that holds it.
    dedupe_key: str | None
    #: At most one running job per key across the cluster.
    lock_key: str | None
    #: A free-form label, stored with the job.
    partition_key: str | None
    #: Who enqueued (a free-form label).
    producer: str | None
    #: The warm state the job wants: a worker warm for it prefers the job.
    affinity_key: str | None
    #: At most ``concurrency_limit`` running jobs per key across the cluster (an
    #: operator's ``queue-ctl limits set`` overrides it).
    concurrency_key: str | None
    #: The running jobs the key allows (1-10000); needs ``concurrency_key``.
    concurrency_limit: int | None
    #: The tokens the job takes from its key's rate bucket (1-100000; default 1);
    #: needs ``concurrency_key``.
    weight: int | None


#: Every name an enqueue takes, ``task`` first: the keys of an ``enqueue_many`` item.
ENQUEUE_OPTIONS: tuple[str, ...] = ("task", *EnqueueOptions.__annotations__)
#: The option names alone (without ``task``), to refuse an unknown one.
OPTION_NAMES = frozenset(EnqueueOptions.__annotations__)


#: The options a task's declaration gives defaults for. An option the caller
#: leaves unset (None) takes the value of the task's declaration in this
#: process, else the database fills it (``JobSpec.defaults_of``).
DEFAULTED_OPTIONS = ("queue", "priority", "max_attempts", "timeout_s", "lease_ttl_s")


class TaskDefaults(Protocol):
    """What enqueue takes from a registered task when the caller does not say."""

    @property
    def queue(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def max_attempts(self) -> int: ...

    @property
    def timeout_s(self) -> int | None: ...

    @property
    def lease_ttl_s(self) -> int | None: ...


@dataclass(slots=True)
class JobSpec:
    """A validated enqueue request, ready to be bound to the enqueue statements.

    ``queue``, ``priority`` and ``max_attempts`` are None (like ``timeout_s``
    and ``lease_ttl_s``) when neither the caller nor a declaration of the task
    in this process gave them: then ``defaults_of`` names the task, and the
    enqueue statement fills them from the task's defaults in the database
    (its published ones, else the built-in ones; migration 0028).

    Its fields are :class:`EnqueueOptions` in the statements' terms (``args``
    as JSON text, ``delay`` in seconds) plus ``task`` and ``defaults_of``.
    :meth:`with_args_json` and :meth:`params` name them one by one rather
    than walk ``dataclasses.fields``: the walk costs twice as much, per item
    of a large ``enqueue_many``. ``tests/unit/test_validation.py`` holds the
    three to :class:`EnqueueOptions`.
    """

    task: str
    queue: str | None
    args_json: str
    priority: int | None
    run_at: datetime | None
    delay_s: float | None
    max_attempts: int | None
    timeout_s: int | None
    lease_ttl_s: int | None
    idempotency_key: str | None
    dedupe_key: str | None
    lock_key: str | None
    partition_key: str | None
    producer: str | None
    #: The warm state the job wants (say, the model it loads); a worker warm for
    #: it prefers the job. Only a preference: any worker of the queue may run it.
    affinity_key: str | None
    #: Per-key concurrency (migration 0031): at most ``concurrency_limit``
    #: running jobs of ``concurrency_key``, unless an operator set the key's limit.
    concurrency_key: str | None
    concurrency_limit: int | None
    #: The tokens the job takes from its key's rate bucket (migration 0033;
    #: None: 1). Only with a concurrency key, whose bucket it draws on.
    weight: int | None
    #: The task whose defaults in the database fill the options still None;
    #: None when there is nothing to fill (the task is declared in this
    #: process, or the caller gave all of :data:`DEFAULTED_OPTIONS`).
    defaults_of: str | None = None

    def with_args_json(self, args_json: str) -> JobSpec:
        """The same request with other args (a bulk item that repeats validated options).

        Positional construction: half the cost of keywords and a quarter of
        ``dataclasses.replace`` per item of a large ``enqueue_many``. A unit
        test checks that it keeps every other field, so a field added to the
        class cannot be shifted here unnoticed.
        """
        return JobSpec(
            self.task,
            self.queue,
            args_json,
            self.priority,
            self.run_at,
            self.delay_s,
            self.max_attempts,
            self.timeout_s,
            self.lease_ttl_s,
            self.idempotency_key,
            self.dedupe_key,
            self.lock_key,
            self.partition_key,
            self.producer,
            self.affinity_key,
            self.concurrency_key,
            self.concurrency_limit,
            self.weight,
            self.defaults_of,
        )

    def params(self) -> dict[str, Any]:
        """Return the named parameters of ``enqueue.sql``."""
        return {
            "task": self.task,
            "queue": self.queue,
            "args": self.args_json,
            "priority": self.priority,
            "run_at": self.run_at,
            "delay_s": self.delay_s,
            "max_attempts": self.max_attempts,
            "timeout_s": self.timeout_s,
            "lease_ttl_s": self.lease_ttl_s,
            "idempotency_key": self.idempotency_key,
            "dedupe_key": self.dedupe_key,
            "lock_key": self.lock_key,
            "partition_key": self.partition_key,
            "producer": self.producer,
            "affinity_key": self.affinity_key,
            "concurrency_key": self.concurrency_key,
            "concurrency_limit": self.concurrency_limit,
            "weight": self.weight,
            "defaults_of": self.defaults_of,
        }


def check_queue_name(queue: str) -> str:
    """Refuse a queue name outside the documented character set and length."""
    if not isinstance(queue, str):  # before the cache: an unhashable value would raise TypeError
        _refuse_queue_name(queue)
    return _check_queue_name(queue)


@lru_cache(maxsize=4096)
def _check_queue_name(queue: str) -> str:
    # fullmatch: with match(), "$" also matches before a trailing newline.
    if not QUEUE_PATTERN.fullmatch(queue):
        _refuse_queue_name(queue)
    return queue


def _refuse_queue_name(queue: Any) -> NoReturn:
    raise ValidationError(
        f"invalid queue name {queue!r}: use 1-64 characters of letters, digits and _ . : -, "
        "starting with a letter or digit"
    )


def check_task_name(task: str) -> str:
    """Refuse a task name outside the documented character set and length."""
    if not isinstance(task, str):  # before the cache: an unhashable value would raise TypeError
        _refuse_task_name(task)
    return _check_task_name(task)


@lru_cache(maxsize=4096)
def _check_task_name(task: str) -> str:
    # fullmatch: with match(), "$" also matches before a trailing newline.
    if not TASK_PATTERN.fullmatch(task):
        _refuse_task_name(task)
    return task


def _refuse_task_name(task: Any) -> NoReturn:
    raise ValidationError(
        f"invalid task name {task!r}: use 1-128 characters of letters, digits and _ . : -, "
        "starting with a letter or _"
    )


def check_id(kind: str, value: Any) -> int:
    """Refuse anything but an integer id in :data:`ID_RANGE` (``kind``: "job", "workflow")."""
    low, high = ID_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(
            f"{kind} id must be a positive integer of at most {high} (a bigint), got {value!r}"
        )
    return value


def _check_int(name: str, value: Any, bounds: tuple[int, int]) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{name} must be an integer, got {value!r}")
    low, high = bounds
    if not low <= value <= high:
        raise ValidationError(f"{name} must be between {low} and {high}, got {value}")
    return value


def _check_key(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_LENGTH:
        raise ValidationError(
            f"{name} must be a non-empty string of at most {MAX_KEY_LENGTH} characters"
        )
    if "\x00" in value:
        # Postgres text cannot hold NUL; the driver would refuse it with a DataError.
        raise ValidationError(
            f"{name} contains a NUL character (\\x00), which Postgres cannot store"
        )
    if not value.isascii() and _surrogate(value):
        raise ValidationError(f"{name} contains a lone UTF-16 surrogate, which is not text")
    return value


def check_concurrency_key(value: Any) -> str | None:
    """A job's ``concurrency_key`` (None: the job has none); the rules of every key option."""
    return _check_key("concurrency_key", value)


def check_partition_key(value: Any) -> str | None:
    """A job's ``partition_key`` (its tenant for fair share, migration 0032; None: none)."""
    return _check_key("partition_key", value)


def check_concurrency_limit(value: Any) -> int | None:
    """A job's own ``concurrency_limit``: 1 to 10000 running jobs of its key (None: none)."""
    if value is None:
        return None
    return _check_int("concurrency_limit", value, CONCURRENCY_LIMIT_RANGE)


def check_weight(value: Any) -> int | None:
    """A job's ``weight``: the 1 to 100000 tokens it takes from its key's bucket (None: 1)."""
    if value is None:
        return None
    return _check_int("weight", value, WEIGHT_RANGE)


def _surrogate(text: str) -> bool:
    """True when ``text`` holds a lone UTF-16 surrogate (JSON ``"\\ud800"``), which no
    UTF-8 text, Postgres's included, can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def find_nul(value: Any, path: str = "args", *, surrogates: bool = False) -> str | None:
    """Where the first NUL character in a JSON-able value is (``args['a'][0]``), or None.

    Postgres ``jsonb`` refuses ``\\u0000`` in any string, key or value, with an
    ``UntranslatableCharacter`` error that names neither the job nor the place;
    this names the place. Only called when the encoded JSON contains the escape,
    so an enqueue without a NUL never walks its args. With ``surrogates``, a
    lone UTF-16 surrogate counts too (``jsonb`` refuses it as well).
    """

    def bad(text: str) -> bool:
        return "\x00" in text or (surrogates and _surrogate(text))

    if isinstance(value, str):
        return path if bad(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and bad(key):
                return f"the key {key!r} of {path}"
            found = find_nul(item, f"{path}[{key!r}]", surrogates=surrogates)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = find_nul(item, f"{path}[{index}]", surrogates=surrogates)
            if found is not None:
                return found
    return None


def encode_args(args: Any) -> str:
    """Serialise job args to JSON, refusing non-objects, non-JSON values, NULs and oversize payloads."""
    if args is None or args == {}:
        return "{}"
    if not isinstance(args, dict):
        raise ValidationError(f"args must be a dict (a JSON object), got {type(args).__name__}")
    try:
        encoded = _ARGS_ENCODER.encode(args)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"args are not JSON-serialisable: {exc}") from None
    # json.dumps writes a NUL as the escape \u0000 (an escaped backslash before
    # "u0000" matches too, hence the walk to confirm and to say where).
    if "\\u0000" in encoded:
        where = find_nul(args)
        if where is not None:
            raise ValidationError(
                f"args contain a NUL character (\\u0000) in {where}, which Postgres jsonb "
                "cannot store; remove it or encode the value (e.g. base64)"
            )
    # Every character past ASCII is written as an escape; a surrogate's starts
    # with \ud8-\udf (a pair, for a character past U+FFFF, is fine: confirm).
    if "\\ud" in encoded:
        where = find_nul(args, surrogates=True)
        if where is not None:
            raise ValidationError(
                f"args contain a lone UTF-16 surrogate in {where}, which is not text: "
                "no UTF-8 encoding (Postgres's included) can store it"
            )
    size = len(encoded.encode())
    if size > MAX_ARGS_BYTES:
        raise ValidationError(f"args are {size} bytes as JSON; the limit is {MAX_ARGS_BYTES} bytes")
    return encoded


def _delay_seconds(delay: Any) -> float:
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise ValidationError(f"delay must be seconds or a timedelta, got {delay!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValidationError(f"delay must be a finite number of seconds >= 0, got {delay!r}")
    if seconds > MAX_DELAY_S:
        raise ValidationError(
            f"delay must be at most {MAX_DELAY_S} seconds (about 3,000 years), got {delay!r}; "
            "for a job that should wait for something, enqueue it when that happens"
        )
    return seconds


def _check_run_at(run_at: Any) -> datetime:
    """``run_at`` in UTC: Postgres takes offsets up to 15:59 only (Python's go to 23:59)."""
    if not isinstance(run_at, datetime) or run_at.tzinfo is None:
        raise ValidationError("run_at must be a timezone-aware datetime")
    try:
        # A time whose UTC instant is outside years 1-9999 would be stored, and
        # then fail to load as a Python datetime when the row is read back.
        return run_at.astimezone(UTC)
    except OverflowError:
        raise ValidationError(
            f"run_at must fall within the years 1-9999 in UTC, got {run_at.isoformat()}"
        ) from None


def build_spec(
    task: str, *, declared: TaskDefaults | None = None, **options: Unpack[EnqueueOptions]
) -> JobSpec:
    """Validate enqueue options given as keywords (:func:`spec_from_options`)."""
    return spec_from_options(task, options, declared)


def spec_from_options(
    task: str, options: EnqueueOptions, declared: TaskDefaults | None = None
) -> JobSpec:
    """Validate enqueue options; ``declared`` (the registered task, if any) supplies defaults.

    Without a declaration, an option left None stays None and the spec's
    ``defaults_of`` names the task: the database fills it. An option name
    that :class:`EnqueueOptions` does not know is a ``TypeError``, as an
    unknown keyword argument of a function is.
    """
    if not options.keys() <= OPTION_NAMES:
        _refuse_unknown(options)
    check_task_name(task)
    queue = options.get("queue")
    priority = options.get("priority")
    max_attempts = options.get("max_attempts")
    timeout_s = options.get("timeout_s")
    lease_ttl_s = options.get("lease_ttl_s")
    defaults_of = None
    if declared is not None:
        if queue is None:
            queue = declared.queue
        if priority is None:
            priority = declared.priority
        if max_attempts is None:
            max_attempts = declared.max_attempts
        if timeout_s is None:
            timeout_s = declared.timeout_s
        if lease_ttl_s is None:
            lease_ttl_s = declared.lease_ttl_s
    elif None in (queue, priority, max_attempts, timeout_s, lease_ttl_s):
        defaults_of = task
    concurrency_key = check_concurrency_key(options.get("concurrency_key"))
    concurrency_limit = check_concurrency_limit(options.get("concurrency_limit"))
    weight = check_weight(options.get("weight"))
    if declared is not None and concurrency_key is None and concurrency_limit is None:
        # The task's declaration (@task(concurrency_key=...)): a job that gives
        # neither takes both; getattr, as a TaskDefaults need not declare them.
        concurrency_key = getattr(declared, "concurrency_key", None)
        concurrency_limit = getattr(declared, "concurrency_limit", None)
    if declared is not None and weight is None:
        weight = getattr(declared, "weight", None)
    if concurrency_limit is not None and concurrency_key is None:
        raise ValidationError("concurrency_limit needs a concurrency_key (the key it limits)")
    if weight is not None and concurrency_key is None:
        raise ValidationError("weight needs a concurrency_key (whose rate bucket it draws on)")
    run_at = options.get("run_at")
    delay = options.get("delay")
    if run_at is not None and delay is not None:
        raise ValidationError("give either run_at or delay, not both")
    if run_at is not None:
        run_at = _check_run_at(run_at)
    return JobSpec(
        task=task,
        queue=None if queue is None else check_queue_name(queue),
        args_json=encode_args(options.get("args")),
        priority=None if priority is None else _check_int("priority", priority, PRIORITY_RANGE),
        run_at=run_at,
        delay_s=None if delay is None else _delay_seconds(delay),
        max_attempts=None
        if max_attempts is None
        else _check_int("max_attempts", max_attempts, MAX_ATTEMPTS_RANGE),
        timeout_s=None if timeout_s is None else _check_int("timeout_s", timeout_s, TIMEOUT_RANGE),
        lease_ttl_s=None
        if lease_ttl_s is None
        else _check_int("lease_ttl_s", lease_ttl_s, LEASE_TTL_RANGE),
        idempotency_key=_check_key("idempotency_key", options.get("idempotency_key")),
        dedupe_key=_check_key("dedupe_key", options.get("dedupe_key")),
        lock_key=_check_key("lock_key", options.get("lock_key")),
        partition_key=_check_key("partition_key", options.get("partition_key")),
        producer=_check_key("producer", options.get("producer")),
        affinity_key=_check_key("affinity_key", options.get("affinity_key")),
        concurrency_key=concurrency_key,
        concurrency_limit=concurrency_limit,
        weight=weight,
        defaults_of=defaults_of,
    )


def _refuse_unknown(options: EnqueueOptions) -> NoReturn:
    """The error of an unknown option name: a TypeError, as Python's for an unknown keyword."""
    name = next(key for key in options if key not in OPTION_NAMES)
    close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
    hint = f", did you mean {close[0]!r}?" if close else ""
    raise TypeError(f"enqueue() got an unexpected keyword argument {name!r}{hint}")


def check_option_names(item: dict[str, Any], *, where: str) -> None:
    """Refuse unknown keys in an ``enqueue_many`` item, suggesting the closest known one."""
    for key in item:
        if key not in ENQUEUE_OPTIONS:
            close = (
                difflib.get_close_matches(key, ENQUEUE_OPTIONS, n=1) if isinstance(key, str) else []
            )
            hint = (
                f", did you mean {close[0]!r}?"
                if close
                else f"; known: {', '.join(ENQUEUE_OPTIONS)}"
            )
            raise ValidationError(f"{where}: unknown option {key!r}{hint}")
    if "task" not in item:
        raise ValidationError(f"{where}: 'task' is required")
