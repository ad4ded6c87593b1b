"""Named workflows: a function that builds a :class:`Workflow` from params, registered by name.

queue_workflows read a DAG from its host by name (``load_workflow(name)``,
``pipeline_schema(name)``), so a run could be asked for by name alone. Here
the same is a decorator in the app module::

    @workflow("nightly-etl")
    def nightly(params):
        wf = Workflow("nightly-etl", idempotency_key=f"nightly-etl:{params['day']}")
        ...
        return wf

and ``Client.start_workflow("nightly-etl", {"day": "2026-11-23"})`` (or
``queue-ctl workflows start nightly-etl --app myapp --params '{...}'``) builds
and starts it. The provider is code: only a process that imported the module
can use the name; what is stored is the workflow it built, as for any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.workflows.spec import NAME_PATTERN, Workflow

#: A provider: called with the params (a JSON object), returns the workflow to start.
WorkflowProvider = Callable[[dict[str, Any]], Workflow]
P = TypeVar("P", bound=WorkflowProvider)


class WorkflowProviders:
    """The named providers this process has imported (one registry per process)."""

    def __init__(self) -> None:
        self._providers: dict[str, WorkflowProvider] = {}

    def add(self, name: str, provider: WorkflowProvider) -> None:
        """Register ``provider`` as ``name``; the same function again is a no-op (a re-import)."""
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ValidationError(f"workflow provider name must be a workflow name, got {name!r}")
        if not callable(provider):
            raise ValidationError(f"workflow provider {name}: not callable: {provider!r}")
        known = self._providers.get(name)
        if known is not None and _qualname(known) != _qualname(provider):
            raise ValidationError(
                f"workflow provider {name} is already {_qualname(known)}, not {_qualname(provider)}"
            )
        self._providers[name] = provider

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._providers)

    def build(self, name: str, params: Mapping[str, Any] | None = None) -> Workflow:
        """The workflow ``name`` builds from ``params``; a ValidationError if it cannot."""
        provider = self._providers.get(name)
        if provider is None:
            known = ", ".join(self.names()) or "none: import the app module that declares them"
            raise ValidationError(f"no workflow provider named {name!r} (known: {known})")
        if params is None:
            params = {}
        if not isinstance(params, Mapping):
            raise ValidationError(
                f"workflow {name}: params must be a JSON object, got {type(params).__name__}"
            )
        try:
            built = provider(dict(params))
        except ValidationError as exc:
            raise ValidationError(f"workflow provider {name}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            # The params did not suit the provider: the caller's mistake, said in one line.
            raise ValidationError(
                f"workflow provider {name} refused its params: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(built, Workflow):
            raise ValidationError(
                f"workflow provider {name} returned {type(built).__name__}, not a Workflow"
            )
        return built


def _qualname(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


providers = WorkflowProviders()


def workflow(name: str) -> Callable[[P], P]:
    """Register the decorated function as the provider of the workflow called ``name``."""

    def decorate(provider: P) -> P:
        providers.add(name, provider)
        return provider

    return decorate
