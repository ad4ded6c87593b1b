"""Task registry: the ``@task`` decorator and loading of the worker's app module.

A worker process imports one app module (``--app``); importing it runs the
``@task`` decorators, which fill the process-wide :data:`registry`. A worker
publishes its registry to the database when it starts
(:mod:`queue_engine.producer.task_publications`), so every enqueue path (the CLI, the
HTTP API, SQL, a producer that never imported the app) applies each task's
defaults (queue, priority, max_attempts, timeout, lease). A producer that
imports the app applies its own declarations without asking the database.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.producer.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    LEASE_TTL_RANGE,
    MAX_ATTEMPTS_RANGE,
    PRIORITY_RANGE,
    TIMEOUT_RANGE,
    check_concurrency_key,
    check_concurrency_limit,
    check_queue_name,
    check_task_name,
    check_weight,
)

Handler = Callable[..., Any]
H = TypeVar("H", bound=Handler)


@dataclass(frozen=True, slots=True)
class TaskDefinition:
    """A registered handler and its per-task policy."""

    name: str
    handler: Handler
    queue: str = DEFAULT_QUEUE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    timeout_s: int | None = None
    stall_timeout_s: int | None = None
    retry: Any = None
    wants_context: bool = field(default=False)
    priority: int = DEFAULT_PRIORITY
    lease_ttl_s: int | None = None
    #: The concurrency key and limit of its jobs (migration 0031): an enqueue in
    #: a process that declares the task and gives no key of its own takes them.
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    #: The tokens each job takes from its key's rate bucket (migration 0033).
    weight: int | None = None

    @property
    def kind(self) -> str:
        """One of ``function``, ``coroutine``, ``generator``, ``async_generator``."""
        if inspect.isasyncgenfunction(self.handler):
            return "async_generator"
        if inspect.isgeneratorfunction(self.handler):
            return "generator"
        if inspect.iscoroutinefunction(self.handler):
            return "coroutine"
        return "function"


#: Parameter names that say "this is the job's context", not its arguments.
_CONTEXT_NAMES = frozenset({"ctx", "context"})
#: The class name of a context annotation (ours, and pqrun's ``JobContext``).
_CONTEXT_CLASS = "JobContext"


def _is_context_parameter(param: inspect.Parameter) -> bool:
    """True for a parameter named ``ctx``/``context`` or annotated ``JobContext`` (any module's)."""
    if param.name in _CONTEXT_NAMES:
        return True
    annotation = param.annotation
    if isinstance(annotation, str):  # ``from __future__ import annotations``
        return annotation.rpartition(".")[2].strip("'\"") == _CONTEXT_CLASS
    return getattr(annotation, "__name__", None) == _CONTEXT_CLASS


def _accepts_context(name: str, handler: Handler) -> bool:
    """Return True for ``(args, ctx)`` handlers, False for ``(args)``; refuse anything else.

    The worker calls a handler with the job's args, and with its context
    second when the handler requires two positional parameters
    (:meth:`queue_engine.worker.executor.Executor.run`). A handler that
    could not take that call is refused here, at import, with one line: a
    wrong signature found when the first job runs would fail every attempt
    of every job of the task instead. pqrun's handlers take ``(ctx)`` alone;
    such a handler would be called with the args dict in its ``ctx`` and fail
    (or worse, half-work) on each job, so one required parameter that is
    named or annotated as a context is refused with the way to rewrite it.
    """
    label = getattr(handler, "__qualname__", None) or type(handler).__qualname__
    try:
        signature = inspect.signature(handler)
    except (TypeError, ValueError):
        raise ValidationError(
            f"task {name!r}: cannot read the signature of handler {label}: "
            "the worker calls it with (args) or (args, ctx)"
        ) from None
    params = list(signature.parameters.values())
    required = [
        p
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        and p.default is inspect.Parameter.empty
    ]
    keyword_only = [
        p.name
        for p in params
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    ]
    shown = f"task {name!r}: handler {label}{signature}"
    if len(required) == 1 and _is_context_parameter(required[0]):
        ctx = required[0].name
        raise ValidationError(
            f"{shown} takes only a context, but the worker calls it with (args): "
            f"write it as {label}(args, {ctx}) (pqrun's handler(ctx) shape: "
            f"the job's arguments, ctx.job.payload there, come first here)"
        )
    if keyword_only:
        raise ValidationError(
            f"{shown} must take (args) or (args, ctx): the worker never passes "
            f"its required keyword-only parameter(s) {', '.join(keyword_only)}"
        )
    if len(required) not in (1, 2):
        hint = (
            " (a decorator without functools.wraps hides the handler's own signature)"
            if not required and any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
            else ""
        )
        raise ValidationError(
            f"{shown} must take (args) or (args, ctx): "
            f"it takes {len(required)} required positional parameters{hint}"
        )
    return len(required) == 2


class TaskRegistry:
    """Name → :class:`TaskDefinition`; a name can be registered once."""

    def __init__(self) -> None:
        self._tasks: dict[str, TaskDefinition] = {}

    def register(self, definition: TaskDefinition) -> None:
        """Add a task, refusing a second handler under the same name."""
        existing = self._tasks.get(definition.name)
        if existing is not None and existing.handler is not definition.handler:
            raise ValidationError(
                f"task {definition.name!r} is already registered by "
                f"{existing.handler.__module__}.{existing.handler.__qualname__}"
            )
        self._tasks[definition.name] = definition

    def get(self, name: str) -> TaskDefinition | None:
        """Return the task or None."""
        return self._tasks.get(name)

    def names(self) -> list[str]:
        """Return the registered task names, sorted."""
        return sorted(self._tasks)

    def unregister(self, name: str) -> None:
        """Remove a task (tests use this to keep the registry clean)."""
        self._tasks.pop(name, None)

    def __iter__(self) -> Iterator[TaskDefinition]:
        return iter(list(self._tasks.values()))

    def __len__(self) -> int:
        return len(self._tasks)


registry = TaskRegistry()


def task(
    name: str,
    *,
    queue: str = DEFAULT_QUEUE,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    timeout_s: int | None = None,
    stall_timeout_s: int | None = None,
    retry: Any = None,
    priority: int = DEFAULT_PRIORITY,
    lease_ttl_s: int | None = None,
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    weight: int | None = None,
) -> Callable[[H], H]:
    """Register the decorated function, coroutine or generator as the handler of ``name``.

    ``queue``, ``priority``, ``max_attempts``, ``timeout_s`` and
    ``lease_ttl_s`` are the defaults of its jobs: every enqueue that leaves
    one unset takes it, from whichever producer (workers publish them).
    ``concurrency_key`` and ``concurrency_limit`` (at most that many of its
    jobs running at once, fleet-wide) are taken by an enqueue that gives no
    key of its own, in a process that declares the task: they are not
    published yet, so a producer that only knows the task's name enqueues
    without them (docs/guides/enqueueing.md, "Concurrency keys").
    ``weight`` (with a ``concurrency_key``) is the tokens each job takes from
    its key's rate bucket (``queue-ctl limits set KEY --rate``; default 1),
    taken the same way.
    """
    check_task_name(name)
    check_queue_name(queue)
    check_concurrency_key(concurrency_key)
    check_concurrency_limit(concurrency_limit)
    if concurrency_limit is not None and concurrency_key is None:
        raise ValidationError(f"task {name!r}: concurrency_limit needs a concurrency_key")
    check_weight(weight)
    if weight is not None and concurrency_key is None:
        raise ValidationError(f"task {name!r}: weight needs a concurrency_key")
    for option, value, (low, high) in (
        ("max_attempts", max_attempts, MAX_ATTEMPTS_RANGE),
        ("priority", priority, PRIORITY_RANGE),
        ("timeout_s", timeout_s, TIMEOUT_RANGE),
        ("stall_timeout_s", stall_timeout_s, TIMEOUT_RANGE),
        ("lease_ttl_s", lease_ttl_s, LEASE_TTL_RANGE),
    ):
        optional = option not in ("max_attempts", "priority")
        if (value is None and optional) or (
            not isinstance(value, bool) and isinstance(value, int) and low <= value <= high
        ):
            continue
        raise ValidationError(
            f"task {name!r}: {option} must be an integer between {low} and {high}"
        )
    if retry is not None and not callable(getattr(retry, "delay", None)):
        raise ValidationError(f"task {name!r}: retry must be a policy with a delay(attempt) method")

    def decorate(handler: H) -> H:
        if not callable(handler):
            raise ValidationError(f"@task({name!r}) must decorate a callable")
        registry.register(
            TaskDefinition(
                name=name,
                handler=handler,
                queue=queue,
                max_attempts=max_attempts,
                timeout_s=timeout_s,
                stall_timeout_s=stall_timeout_s,
                retry=retry,
                wants_context=_accepts_context(name, handler),
                priority=priority,
                lease_ttl_s=lease_ttl_s,
                concurrency_key=concurrency_key,
                concurrency_limit=concurrency_limit,
                weight=weight,
            )
        )
        return handler

    return decorate


def load_app(module_name: str) -> TaskRegistry:
    """Import the app module that registers the tasks; a clear ConfigError if that fails."""
    already_imported = module_name in sys.modules
    known = set(registry.names())
    import_app(module_name)
    if not already_imported and set(registry.names()) == known:
        raise ConfigError(f"app module {module_name!r} registers no task (use @queue_engine.task)")
    return registry


def import_app(module_name: str) -> None:
    """Import the app module (from the current directory too); a clear ConfigError if it fails."""
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
    except Exception as exc:
        raise ConfigError(
            f"app module {module_name!r} failed to import: {type(exc).__name__}: {exc}"
        ) from None
