"""Schedule definitions: the validated :class:`ScheduleSpec` and the ``@periodic`` decorator.

A schedule says *when* (an expression and a time zone, see
:mod:`queue_engine.scheduler.cron`) and *what* (a task, its queue and args).
Schedules live in the ``schedules`` table; those declared in code with
:func:`periodic` are collected in :data:`schedule_registry` when the app module
is imported and synced (upserted) into the table when ``queue-scheduler
--app MODULE`` starts, so operators see every schedule in one list whichever
way it was declared. Every check runs here, before anything is written, so a
bad schedule fails at import (code) or at ``queue-ctl schedules add`` (CLI)
with a message naming the bad part.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from queue_engine.errors import ConfigError, ValidationError
from queue_engine.scheduler.cron import Trigger, parse
from queue_engine.tasks import registry as task_registry
from queue_engine.validation import (
    DEFAULT_PRIORITY,
    MAX_ATTEMPTS_RANGE,
    PRIORITY_RANGE,
    TIMEOUT_RANGE,
    check_queue_name,
    check_task_name,
    encode_args,
)

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
OVERLAP_POLICIES = ("allow", "skip")
CATCHUP_MAX = 1000
#: Where a schedule was declared; shown by ``queue-ctl schedules list``.
SOURCES = ("code", "cli")
#: The reserved key of a scheduled job's args that says why it was enqueued.
SCHEDULE_ARG = "_schedule"

F = TypeVar("F", bound=Callable[..., Any])


def check_schedule_name(name: Any) -> str:
    """Refuse a schedule name outside the documented character set and length."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValidationError(
            f"invalid schedule name {name!r}: use 1-128 characters of letters, digits and "
            "_ . : -, starting with a letter, digit or _"
        )
    return name


def _check_int(name: str, what: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(
            f"schedule {name!r}: {what} must be an integer between {low} and {high}, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A validated schedule, as stored in the ``schedules`` table."""

    name: str
    expression: str
    task: str
    tz: str = "UTC"
    queue: str = "default"
    args: dict[str, Any] = field(default_factory=dict)
    priority: int = DEFAULT_PRIORITY
    max_attempts: int | None = None
    timeout_s: int | None = None
    catchup: int = 0
    overlap: str = "allow"
    enabled: bool = True
    source: str = "cli"

    def __post_init__(self) -> None:
        check_schedule_name(self.name)
        try:
            check_task_name(self.task)
            check_queue_name(self.queue)
            self.trigger  # noqa: B018 - parse now: a bad expression or zone fails here
            encode_args(self.args)
        except ValidationError as exc:
            raise ValidationError(f"schedule {self.name!r}: {exc}") from None
        if SCHEDULE_ARG in self.args:
            raise ValidationError(
                f"schedule {self.name!r}: args key {SCHEDULE_ARG!r} is reserved "
                "(the scheduler puts the slot there)"
            )
        _check_int(self.name, "priority", self.priority, *PRIORITY_RANGE)
        _check_int(self.name, "catchup", self.catchup, 0, CATCHUP_MAX)
        if self.max_attempts is not None:
            _check_int(self.name, "max_attempts", self.max_attempts, *MAX_ATTEMPTS_RANGE)
        if self.timeout_s is not None:
            _check_int(self.name, "timeout_s", self.timeout_s, *TIMEOUT_RANGE)
        if self.overlap not in OVERLAP_POLICIES:
            raise ValidationError(
                f"schedule {self.name!r}: overlap must be 'allow' or 'skip', got {self.overlap!r}"
            )
        if self.source not in SOURCES:
            raise ValidationError(f"schedule {self.name!r}: source must be 'code' or 'cli'")

    @property
    def trigger(self) -> Trigger:
        """The parsed expression (cached by the parser)."""
        return parse(self.expression, self.tz)

    def args_json(self) -> str:
        """The args as the JSON text stored in the table."""
        return json.dumps(self.args, separators=(",", ":"), sort_keys=True)


class ScheduleRegistry:
    """Schedules declared in code, by name; filled by :func:`periodic` at import."""

    def __init__(self) -> None:
        self._specs: dict[str, ScheduleSpec] = {}
        self._pending: list[tuple[Callable[..., Any], dict[str, Any]]] = []

    def add(self, spec: ScheduleSpec) -> None:
        """Add a schedule; a second, different schedule under the same name is refused."""
        existing = self._specs.get(spec.name)
        if existing is not None and existing != spec:
            raise ValidationError(
                f"schedule {spec.name!r} is declared twice; give the second one another name="
            )
        self._specs[spec.name] = spec

    def defer(self, handler: Callable[..., Any], options: dict[str, Any]) -> None:
        """Remember a ``@periodic`` written below ``@task`` (it runs before the task registers)."""
        self._pending.append((handler, options))

    def resolve(self) -> None:
        """Turn deferred declarations into specs now that their ``@task`` has registered."""
        pending, self._pending = self._pending, []
        for handler, options in pending:
            self.add(_spec_for_handler(handler, options))

    def specs(self) -> list[ScheduleSpec]:
        """All declared schedules, sorted by name."""
        self.resolve()
        return [self._specs[n] for n in sorted(self._specs)]

    def get(self, name: str) -> ScheduleSpec | None:
        """The schedule or None."""
        self.resolve()
        return self._specs.get(name)

    def remove(self, name: str) -> None:
        """Forget a schedule (tests use this to keep the registry clean)."""
        self._specs.pop(name, None)

    def clear(self) -> None:
        """Forget every schedule."""
        self._specs.clear()
        self._pending.clear()

    def __iter__(self) -> Iterator[ScheduleSpec]:
        return iter(self.specs())

    def __len__(self) -> int:
        return len(self.specs())


schedule_registry = ScheduleRegistry()


def _task_of(handler: Callable[..., Any]) -> str | None:
    for definition in task_registry:
        if definition.handler is handler:
            return definition.name
    return None


def _spec_for_handler(handler: Callable[..., Any], options: dict[str, Any]) -> ScheduleSpec:
    task = _task_of(handler)
    if task is None:
        qualname = getattr(handler, "__qualname__", repr(handler))
        raise ValidationError(
            f"@periodic on {qualname!r}: the function is not a registered task; "
            "decorate it with @task(...) too, or pass task='name'"
        )
    return _build(task, options)


def _build(task: str, options: dict[str, Any]) -> ScheduleSpec:
    definition = task_registry.get(task)
    values = dict(options)
    if values.get("name") is None:
        values["name"] = task
    if values.get("queue") is None:
        values["queue"] = definition.queue if definition is not None else "default"
    if values.get("args") is None:
        values["args"] = {}
    if values.get("priority") is None:
        values["priority"] = DEFAULT_PRIORITY
    return ScheduleSpec(task=task, source="code", **values)


def periodic(
    expression: str,
    *,
    task: str | None = None,
    name: str | None = None,
    queue: str | None = None,
    args: dict[str, Any] | None = None,
    tz: str = "UTC",
    catchup: int = 0,
    overlap: str = "allow",
    priority: int | None = None,
    max_attempts: int | None = None,
    timeout_s: int | None = None,
    enabled: bool = True,
) -> Callable[[F], F]:
    """Declare a schedule in code: enqueue ``task`` at every slot of ``expression`` in ``tz``.

    Two forms::

        @periodic("*/5 * * * *", queue="load.cbr", tz="Europe/Moscow")
        @task("load_cbr")
        def load_cbr(args): ...

        periodic("every 30s", task="ping", name="ping-30s")   # a registration call

    ``name`` defaults to the task name; ``queue`` to the task's queue. The
    schedule is validated at once (a bad expression or time zone fails the
    import) and written to the ``schedules`` table when ``queue-scheduler
    --app`` starts. ``catchup=N`` enqueues up to N missed slots after the
    scheduler was down (default: skip them); ``overlap="skip"`` skips a slot
    while the schedule's previous job is still queued or running.
    """
    options: dict[str, Any] = {
        "expression": expression,
        "name": name,
        "queue": queue,
        "args": args,
        "tz": tz,
        "catchup": catchup,
        "overlap": overlap,
        "priority": priority,
        "max_attempts": max_attempts,
        "timeout_s": timeout_s,
        "enabled": enabled,
    }
    if task is not None:
        # A registration call: validate and register now; decorating is optional.
        spec = _build(task, options)
        schedule_registry.add(spec)

        def check(handler: F) -> F:
            found = _task_of(handler)
            if found is not None and found != task:
                raise ValidationError(
                    f"@periodic(task={task!r}) decorates the handler of task {found!r}"
                )
            return handler

        return check
    # Validate what can be checked without the task name (name defaults to it).
    probe = {**options, "name": name or "probe"}
    _build("probe", probe)

    def decorate(handler: F) -> F:
        if _task_of(handler) is not None:
            schedule_registry.add(_spec_for_handler(handler, options))
        else:  # @task(...) is above us: it registers after we return
            schedule_registry.defer(handler, options)
        return handler

    return decorate


def load_schedules(module_name: str) -> list[ScheduleSpec]:
    """Import the app module and return the schedules it declares (ConfigError if it fails).

    Unlike the worker's ``load_app``, a module that registers schedules but no
    task (``periodic(..., task="name")`` calls only) is fine here: the
    scheduler enqueues by task name and never runs a handler.
    """
    if not module_name:
        raise ConfigError("no app module given: pass --app MODULE or set QUEUE_ENGINE_APP")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise ConfigError(
                f"app module {module_name!r} not found (check --app and PYTHONPATH)"
            ) from None
        raise ConfigError(f"app module {module_name!r} failed to import: {exc}") from None
    except ValidationError as exc:
        raise ConfigError(f"app module {module_name!r}: {exc}") from None
    except Exception as exc:
        raise ConfigError(
            f"app module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from None
    try:
        return schedule_registry.specs()
    except ValidationError as exc:
        raise ConfigError(f"app module {module_name!r}: {exc}") from None
