"""Schedule definitions: the validated :class:`ScheduleSpec` and the ``@periodic`` decorator.

A schedule says *when* (an expression and a time zone, see
:mod:`queue_engine.producer.cron`) and *what*: a task, its queue and args, or
a workflow factory (``@periodic(..., workflow=build)``, a function of the slot
returning a :class:`~queue_engine.producer.workflows.Workflow`). A factory is code in
the app module, so only ``queue-scheduler --app`` that imported it can start
such a schedule's workflows; a schedule added from the command line cannot
name one.
Schedules live in the ``schedules`` table; those declared in code with
:func:`periodic` are collected in :data:`schedule_registry` when the app module
is imported and synced (upserted) into the table when ``queue-scheduler
--app MODULE`` starts, so operators see every schedule in one list whichever
way it was declared. Every check runs here, before anything is written, so a
bad schedule fails at import (code) or at ``queue-ctl schedules add`` (CLI)
with a message naming the bad part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.producer.cron import Trigger, parse
from queue_engine.producer.tasks import import_app
from queue_engine.producer.tasks import registry as task_registry
from queue_engine.producer.validation import (
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

#: The ``task`` column of a schedule that starts a workflow (its ``workflow`` names the factory).
WORKFLOW_TASK = "queue-engine:workflow"

if TYPE_CHECKING:
    from queue_engine.producer.workflows import Workflow

#: A workflow factory: called with the slot (a timezone-aware datetime), returns the workflow.
WorkflowFactory = Callable[[datetime], "Workflow"]

F = TypeVar("F", bound=Callable[..., Any])


def factory_reference(factory: Callable[..., Any]) -> str:
    """``module:qualname`` of a workflow factory: what the schedules table stores."""
    module = getattr(factory, "__module__", None)
    qualname = getattr(factory, "__qualname__", None)
    if not callable(factory) or not module or not qualname:
        raise ValidationError(
            f"workflow= must be a function of the slot returning a Workflow, got {factory!r}"
        )
    return f"{module}:{qualname}"


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
    #: For a schedule that starts a workflow: its factory, ``module:qualname`` (task is WORKFLOW_TASK).
    workflow: str | None = None

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
        self._check_workflow()

    def _check_workflow(self) -> None:
        if self.workflow is None:
            if self.task == WORKFLOW_TASK:
                raise ValidationError(
                    f"schedule {self.name!r}: task {WORKFLOW_TASK!r} is reserved for schedules "
                    "that start a workflow; declare those in code with "
                    "@periodic(..., workflow=factory)"
                )
            return
        if self.source != "code":
            raise ValidationError(
                f"schedule {self.name!r} starts a workflow ({self.workflow}), which only code "
                "can build: declare it with @periodic(..., workflow=factory) in the app module "
                "and run `queue-scheduler --app MODULE`"
            )
        if self.task != WORKFLOW_TASK or not 1 <= len(self.workflow) <= 255:
            raise ValidationError(
                f"schedule {self.name!r}: a workflow schedule has task {WORKFLOW_TASK!r} and a "
                "factory reference of 1-255 characters"
            )

    @property
    def starts_workflow(self) -> bool:
        """True when each slot starts a workflow (built by the factory) rather than a job."""
        return self.workflow is not None

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
        self._factories: dict[str, WorkflowFactory] = {}

    def add(self, spec: ScheduleSpec, factory: WorkflowFactory | None = None) -> None:
        """Add a schedule (and the factory of a workflow schedule); a different twin is refused."""
        existing = self._specs.get(spec.name)
        if existing is not None and existing != spec:
            raise ValidationError(
                f"schedule {spec.name!r} is declared twice; give the second one another name="
            )
        self._specs[spec.name] = spec
        if factory is not None:
            self._factories[spec.name] = factory

    def factory(self, spec: ScheduleSpec) -> WorkflowFactory | None:
        """The factory this process holds for a workflow schedule (None: not declared here).

        The stored reference must name the same function: a scheduler of another
        app, or of an older version of it, leaves the schedule to the one that can.
        """
        factory = self._factories.get(spec.name)
        if factory is None or spec.workflow != factory_reference(factory):
            return None
        return factory

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
        self._factories.pop(name, None)

    def clear(self) -> None:
        """Forget every schedule."""
        self._specs.clear()
        self._pending.clear()
        self._factories.clear()

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
    workflow: WorkflowFactory | None = None,
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

    ``workflow=factory`` starts a workflow at each slot instead of a job::

        def build_nightly(slot: datetime) -> Workflow: ...

        periodic("0 2 * * *", name="nightly", workflow=build_nightly)

    The factory is called with the slot by ``queue-scheduler --app`` (the only
    process that has it) in the transaction that claims the slot, and its
    workflow is started there with the idempotency key
    ``schedule:<name>:<slot>``: one workflow per slot, however many schedulers
    run. ``name`` defaults to the factory's name; task, queue, args and the job
    options do not apply (the factory's nodes carry their own);
    ``overlap="skip"`` skips a slot while the previous workflow still runs.
    """
    if workflow is not None:
        return _periodic_workflow(
            expression,
            workflow,
            name=name,
            tz=tz,
            catchup=catchup,
            overlap=overlap,
            enabled=enabled,
            job_options={
                "task": task,
                "queue": queue,
                "args": args,
                "priority": priority,
                "max_attempts": max_attempts,
                "timeout_s": timeout_s,
            },
        )
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


def _periodic_workflow(
    expression: str,
    factory: WorkflowFactory,
    *,
    name: str | None,
    tz: str,
    catchup: int,
    overlap: str,
    enabled: bool,
    job_options: dict[str, Any],
) -> Callable[[F], F]:
    """``periodic(..., workflow=factory)``: register a schedule that starts a workflow."""
    given = sorted(k for k, v in job_options.items() if v is not None)
    if given:
        raise ValidationError(
            f"@periodic(workflow=...): {', '.join(given)} do not apply to a workflow schedule "
            "(its nodes carry their own task, queue and options)"
        )
    reference = factory_reference(factory)
    spec = ScheduleSpec(
        name=name if name is not None else getattr(factory, "__name__", ""),
        expression=expression,
        task=WORKFLOW_TASK,
        tz=tz,
        catchup=catchup,
        overlap=overlap,
        enabled=enabled,
        source="code",
        workflow=reference,
    )
    schedule_registry.add(spec, factory)

    def unchanged(target: F) -> F:
        return target

    return unchanged


def load_schedules(module_name: str) -> list[ScheduleSpec]:
    """Import the app module and return the schedules it declares (ConfigError if it fails).

    Unlike the worker's ``load_app``, a module that registers schedules but no
    task (``periodic(..., task="name")`` calls only) is fine here: the
    scheduler enqueues by task name and never runs a handler.
    """
    import_app(module_name)
    try:
        return schedule_registry.specs()
    except ValidationError as exc:
        raise ConfigError(f"app module {module_name!r}: {exc}") from None
