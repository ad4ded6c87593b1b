"""The ``@task`` decorator and ``load_app``: how handlers get registered.

Contracts: a decorated handler is registered under its name with its policy;
a name cannot be taken by a second handler; handlers take ``(args)`` or
``(args, ctx)``; the handler kind (function, coroutine, generator, async
generator) is detected; bad policies are refused at decoration time; and
``load_app`` turns every way an app module can fail into a ``ConfigError``.
"""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from queue_engine import JobContext
from queue_engine import task as public_task
from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.producer.tasks import TaskDefinition, TaskRegistry, load_app, registry, task


def test_decorator_registers_the_handler_and_returns_it_unchanged() -> None:
    def handler(args: dict[str, Any]) -> int:
        return 42

    decorated = task("reg.basic", queue="etl.load", max_attempts=7, timeout_s=60)(handler)
    assert decorated is handler
    assert decorated({}) == 42
    definition = registry.get("reg.basic")
    assert definition is not None
    assert definition.handler is handler
    assert definition.name == "reg.basic"
    assert definition.queue == "etl.load"
    assert definition.max_attempts == 7
    assert definition.timeout_s == 60
    assert "reg.basic" in registry.names()


def test_public_task_is_the_same_decorator() -> None:
    assert public_task is task


def test_defaults_of_a_registered_task() -> None:
    @task("reg.defaults")
    def handler(args: dict[str, Any]) -> None:
        return None

    definition = registry.get("reg.defaults")
    assert definition is not None
    assert definition.queue == "default"
    assert definition.max_attempts == 5
    assert definition.timeout_s is None
    assert definition.stall_timeout_s is None
    assert definition.retry is None


def test_unknown_task_is_none() -> None:
    assert registry.get("reg.never-registered") is None


def test_duplicate_name_with_a_different_handler_is_refused() -> None:
    @task("reg.dup")
    def first(args: dict[str, Any]) -> None:
        return None

    def second(args: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValidationError, match=r"'reg\.dup' is already registered by") as info:
        task("reg.dup")(second)
    assert "first" in str(info.value)
    definition = registry.get("reg.dup")
    assert definition is not None
    assert definition.handler is first


def test_registering_the_same_handler_again_is_allowed() -> None:
    # Re-importing an app module (or a reload) must not fail.
    def handler(args: dict[str, Any]) -> None:
        return None

    task("reg.same", max_attempts=2)(handler)
    task("reg.same", max_attempts=3)(handler)
    definition = registry.get("reg.same")
    assert definition is not None
    assert definition.max_attempts == 3
    assert registry.names().count("reg.same") == 1


def test_handler_taking_args_only_does_not_want_context() -> None:
    @task("sig.args")
    def handler(args: dict[str, Any]) -> None:
        return None

    definition = registry.get("sig.args")
    assert definition is not None
    assert definition.wants_context is False


def test_handler_taking_args_and_ctx_wants_context() -> None:
    @task("sig.ctx")
    def handler(args: dict[str, Any], ctx: Any) -> None:
        return None

    definition = registry.get("sig.ctx")
    assert definition is not None
    assert definition.wants_context is True


def test_optional_and_keyword_only_parameters_do_not_count() -> None:
    @task("sig.optional")
    def handler(args: dict[str, Any], ctx: Any = None, *, flag: bool = False) -> None:
        return None

    definition = registry.get("sig.optional")
    assert definition is not None
    assert definition.wants_context is False


def test_bound_method_counts_without_self() -> None:
    class Handlers:
        def run(self, args: dict[str, Any], ctx: Any) -> None:
            return None

    task("sig.method")(Handlers().run)
    definition = registry.get("sig.method")
    assert definition is not None
    assert definition.wants_context is True


def _no_params() -> None:
    return None


def _three_params(a: Any, b: Any, c: Any) -> None:
    return None


def _kw_only(*, args: Any) -> None:
    return None


@pytest.mark.parametrize("handler", [_no_params, _three_params, _kw_only])
def test_handler_with_a_wrong_signature_is_refused(handler: Any) -> None:
    with pytest.raises(ValidationError, match=r"must take \(args\) or \(args, ctx\)"):
        task("sig.bad")(handler)
    assert registry.get("sig.bad") is None


# pqrun's handler shape, ``async def handler(ctx: JobContext)``: before, it was accepted
# and called with the job's args in ``ctx``, failing (or half-working) on every job.


async def _pqrun_ctx(ctx: Any) -> None:
    return None


def _pqrun_context(context: Any) -> None:
    return None


def _pqrun_annotated(job: JobContext) -> None:
    return None


def _pqrun_annotated_as_text(job: pqrun.JobContext) -> None:  # noqa: F821
    return None


@pytest.mark.parametrize(
    ("handler", "param"),
    [
        (_pqrun_ctx, "ctx"),
        (_pqrun_context, "context"),
        (_pqrun_annotated, "job"),
        (_pqrun_annotated_as_text, "job"),
    ],
)
def test_a_handler_taking_only_a_context_is_refused_with_the_rewrite(
    handler: Any, param: str
) -> None:
    with pytest.raises(ValidationError) as info:
        task("sig.pqrun")(handler)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"task 'sig.pqrun': handler {handler.__qualname__}(")
    assert "takes only a context, but the worker calls it with (args)" in message
    assert f"write it as {handler.__qualname__}(args, {param})" in message
    assert registry.get("sig.pqrun") is None


def test_a_one_parameter_handler_with_another_name_gets_the_args() -> None:
    @task("sig.payload")
    async def handler(payload: dict[str, Any]) -> None:
        return None

    definition = registry.get("sig.payload")
    assert definition is not None
    assert definition.wants_context is False


def test_a_context_second_is_the_usual_shape() -> None:
    @task("sig.pqrun_fixed")
    async def handler(args: dict[str, Any], ctx: JobContext) -> None:
        return None

    definition = registry.get("sig.pqrun_fixed")
    assert definition is not None
    assert definition.wants_context is True


def _required_keyword(args: Any, *, tenant: str) -> None:
    return None


def test_a_required_keyword_only_parameter_is_refused_by_name() -> None:
    with pytest.raises(
        ValidationError, match=r"never passes its required keyword-only parameter\(s\) tenant"
    ):
        task("sig.kw")(_required_keyword)
    assert registry.get("sig.kw") is None


def test_a_wrapper_hiding_the_signature_is_refused_with_a_hint() -> None:
    def wrapper(*args: Any, **kwargs: Any) -> None:
        return None

    with pytest.raises(ValidationError, match=r"without functools\.wraps") as info:
        task("sig.wrapped")(wrapper)
    assert "must take (args) or (args, ctx)" in str(info.value)


def test_non_callable_is_refused() -> None:
    with pytest.raises(ValidationError, match="must decorate a callable"):
        task("sig.not_callable")(42)  # type: ignore[type-var]
    assert registry.get("sig.not_callable") is None


def _function(args: dict[str, Any]) -> None:
    return None


async def _coroutine(args: dict[str, Any]) -> None:
    return None


def _generator(args: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield {"done": 1}


async def _async_generator(args: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield {"done": 1}


@pytest.mark.parametrize(
    ("handler", "kind"),
    [
        (_function, "function"),
        (_coroutine, "coroutine"),
        (_generator, "generator"),
        (_async_generator, "async_generator"),
        (lambda args: None, "function"),
    ],
)
def test_handler_kind_is_detected(handler: Any, kind: str) -> None:
    task("kind.detect")(handler)
    definition = registry.get("kind.detect")
    assert definition is not None
    assert definition.kind == kind


@pytest.mark.parametrize("max_attempts", [0, 1001, -1, True, 2.5, "3"])
def test_invalid_max_attempts_is_refused(max_attempts: Any) -> None:
    with pytest.raises(ValidationError, match="max_attempts must be an integer between 1 and 1000"):
        task("policy.attempts", max_attempts=max_attempts)
    assert registry.get("policy.attempts") is None


@pytest.mark.parametrize("option", ["timeout_s", "stall_timeout_s"])
@pytest.mark.parametrize("value", [0, -5, 7 * 24 * 3600 + 1, True, 1.5, "60"])
def test_invalid_timeouts_are_refused(option: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=f"{option} must be an integer between 1 and"):
        task("policy.timeout", **{option: value})


def test_timeouts_at_the_bounds_are_accepted() -> None:
    @task("policy.bounds", timeout_s=1, stall_timeout_s=7 * 24 * 3600, max_attempts=1000)
    def handler(args: dict[str, Any]) -> None:
        return None

    definition = registry.get("policy.bounds")
    assert definition is not None
    assert (definition.timeout_s, definition.stall_timeout_s, definition.max_attempts) == (
        1,
        7 * 24 * 3600,
        1000,
    )


@pytest.mark.parametrize("queue", ["", "bad queue", "-x", "q" * 65, "abc\n"])
def test_invalid_queue_is_refused(queue: str) -> None:
    with pytest.raises(ValidationError, match="invalid queue name"):
        task("policy.queue", queue=queue)


@pytest.mark.parametrize("name", ["", "1task", "bad name", "t" * 129])
def test_invalid_task_name_is_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid task name"):
        task(name)


def test_retry_policy_must_have_a_delay_method() -> None:
    with pytest.raises(ValidationError, match="retry must be a policy"):
        task("policy.retry", retry=object())

    class Fixed:
        def delay(self, attempt: int) -> float:
            return 1.0

    policy = Fixed()

    @task("policy.retry_ok", retry=policy)
    def handler(args: dict[str, Any]) -> None:
        return None

    definition = registry.get("policy.retry_ok")
    assert definition is not None
    assert definition.retry is policy


def test_registry_unregister_and_iteration() -> None:
    reg = TaskRegistry()

    def handler(args: dict[str, Any]) -> None:
        return None

    reg.register(TaskDefinition(name="b", handler=handler))
    reg.register(TaskDefinition(name="a", handler=handler))
    assert reg.names() == ["a", "b"]
    assert len(reg) == 2
    assert sorted(d.name for d in reg) == ["a", "b"]
    reg.unregister("a")
    reg.unregister("missing")  # no error
    assert reg.names() == ["b"]


# --- load_app ---------------------------------------------------------------------


def _write_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    name = f"qe_app_{uuid.uuid4().hex[:12]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_load_app_imports_the_module_and_returns_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _write_module(
        tmp_path,
        monkeypatch,
        """
        from queue_engine import task

        @task("app.hello", queue="greetings", max_attempts=2)
        def hello(args):
            return {"hello": args.get("who", "world")}

        @task("app.slow")
        async def slow(args, ctx):
            return None
        """,
    )
    loaded = load_app(name)
    assert loaded is registry
    hello = registry.get("app.hello")
    slow = registry.get("app.slow")
    assert hello is not None and slow is not None
    assert hello.queue == "greetings"
    assert hello.max_attempts == 2
    assert hello.handler({"who": "x"}) == {"hello": "x"}
    assert slow.kind == "coroutine"
    assert slow.wants_context is True


def test_load_app_of_a_package_submodule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = f"qe_pkg_{uuid.uuid4().hex[:12]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "jobs.py").write_text(
        "from queue_engine import task\n\n@task('pkg.job')\ndef job(args):\n    return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    load_app(f"{package}.jobs")
    assert registry.get("pkg.job") is not None


def test_load_app_missing_module_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="app module 'qe_no_such_module_xyz' not found") as info:
        load_app("qe_no_such_module_xyz")
    assert info.value.exit_code == 2


def test_load_app_missing_submodule_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = f"qe_pkg_{uuid.uuid4().hex[:12]}"
    (tmp_path / package).mkdir()
    (tmp_path / package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=f"app module '{package}.missing' not found"):
        load_app(f"{package}.missing")


def test_load_app_module_importing_a_missing_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The app exists, but one of its imports does not: say the app failed to import,
    # naming the missing dependency, not that the app was not found.
    name = _write_module(tmp_path, monkeypatch, "import qe_missing_dependency_abc\n")
    with pytest.raises(ConfigError) as info:
        load_app(name)
    message = str(info.value)
    assert f"app module {name!r} failed to import" in message
    assert "qe_missing_dependency_abc" in message


def test_load_app_module_registering_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # load_app checks the process-wide registry: start from an empty one so that
    # tasks registered by other test modules at import cannot hide the error.
    monkeypatch.setattr(registry, "_tasks", {})
    name = _write_module(tmp_path, monkeypatch, "X = 1\n")
    with pytest.raises(ConfigError, match=f"app module {name!r} registers no task"):
        load_app(name)


def test_load_app_module_raising_at_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = _write_module(tmp_path, monkeypatch, "raise RuntimeError('boom at import')\n")
    with pytest.raises(ConfigError) as info:
        load_app(name)
    message = str(info.value)
    assert name in message
    assert "RuntimeError: boom at import" in message


def test_load_app_module_with_a_syntax_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _write_module(tmp_path, monkeypatch, "def broken(:\n")
    with pytest.raises(ConfigError, match=f"app module {name!r} failed to import: SyntaxError"):
        load_app(name)


def test_load_app_module_with_a_bad_task_declaration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _write_module(
        tmp_path,
        monkeypatch,
        """
        from queue_engine import task

        @task("app.bad", max_attempts=0)
        def bad(args):
            return None
        """,
    )
    with pytest.raises(ConfigError, match=r"ValidationError: task 'app\.bad': max_attempts"):
        load_app(name)


def test_load_app_without_a_module_name() -> None:
    with pytest.raises(ConfigError, match="no app module given"):
        load_app("")
