"""The executor for every handler kind, and the worker's other pure parts.

Handlers are called with ``(args)`` or ``(args, ctx)``; generators and async
generators report each ``yield`` to a fake checkpoint object, which can
demand a stop. Also here: settings validation, secret masking, JSON log
records, and the heartbeat's cadence with a fake clock (no sleeping).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from queue_engine.daemon.heartbeat import Heartbeat
from queue_engine.daemon.service import Timing
from queue_engine.foundation.errors import ConfigError
from queue_engine.foundation.logs import JsonFormatter, log_event, mask_secrets
from queue_engine.producer.tasks import TaskDefinition, _accepts_context
from queue_engine.worker.executor import Executor, JobCanceled
from queue_engine.worker.settings import WorkerSettings


class FakeCtx:
    """Records checkpoints; asks to stop after ``cancel_after`` of them."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.values: list[object] = []
        self.cancel_after = cancel_after

    def checkpoint(self, value: object = None) -> bool:
        self.values.append(value)
        return self.cancel_after is not None and len(self.values) >= self.cancel_after


def define(handler: Any) -> TaskDefinition:
    return TaskDefinition(name="t", handler=handler, wants_context=_accepts_context("t", handler))


@pytest.fixture
def executor() -> Iterator[Executor]:
    ex = Executor()
    yield ex
    ex.close()


# -- the four kinds, with (args) and (args, ctx) ----------------------------------


def test_plain_function(executor: Executor) -> None:
    def one(args: dict[str, Any]) -> int:
        return int(args["n"]) + 1

    def two(args: dict[str, Any], ctx: FakeCtx) -> str:
        return f"{args['n']}-{type(ctx).__name__}"

    assert executor.run(define(one), {"n": 1}, FakeCtx()) == 2
    assert executor.run(define(two), {"n": 1}, FakeCtx()) == "1-FakeCtx"


def test_coroutine(executor: Executor) -> None:
    async def one(args: dict[str, Any]) -> int:
        return int(args["n"]) * 2

    async def two(args: dict[str, Any], ctx: FakeCtx) -> bool:
        return ctx.checkpoint({"in": "coroutine"})

    assert executor.run(define(one), {"n": 4}, FakeCtx()) == 8
    ctx = FakeCtx()
    assert executor.run(define(two), {}, ctx) is False
    assert ctx.values == [{"in": "coroutine"}]
    # The loop is reused between jobs.
    assert executor.run(define(one), {"n": 5}, FakeCtx()) == 10


def test_generator_checkpoints_and_return_value(executor: Executor) -> None:
    def one(args: dict[str, Any]) -> Iterator[object]:
        yield {"step": 1}
        yield None
        return "done"

    def two(args: dict[str, Any], ctx: FakeCtx) -> Iterator[object]:
        for i in range(args["n"]):
            yield {"i": i}
        return len(ctx.values)

    ctx = FakeCtx()
    assert executor.run(define(one), {}, ctx) == "done"
    assert ctx.values == [{"step": 1}, None]
    assert executor.run(define(two), {"n": 3}, FakeCtx()) == 3


def test_async_generator_checkpoints_and_returns_none(executor: Executor) -> None:
    async def one(args: dict[str, Any]) -> AsyncIterator[object]:
        yield {"a": 1}
        yield {"a": 2}

    async def two(args: dict[str, Any], ctx: FakeCtx) -> AsyncIterator[object]:
        yield {"ctx": type(ctx).__name__}

    ctx = FakeCtx()
    assert executor.run(define(one), {}, ctx) is None
    assert ctx.values == [{"a": 1}, {"a": 2}]
    ctx2 = FakeCtx()
    executor.run(define(two), {}, ctx2)
    assert ctx2.values == [{"ctx": "FakeCtx"}]


def test_generator_is_stopped_and_closed_at_a_cancel(executor: Executor) -> None:
    cleaned: list[str] = []

    def gen(args: dict[str, Any]) -> Iterator[int]:
        try:
            yield from range(100)
        finally:
            cleaned.append("closed")

    ctx = FakeCtx(cancel_after=3)
    with pytest.raises(JobCanceled):
        executor.run(define(gen), {}, ctx)
    assert ctx.values == [0, 1, 2]
    assert cleaned == ["closed"]


def test_async_generator_is_stopped_and_closed_at_a_cancel(executor: Executor) -> None:
    cleaned: list[str] = []

    async def agen(args: dict[str, Any]) -> AsyncIterator[int]:
        try:
            for i in range(100):
                yield i
        finally:
            cleaned.append("closed")

    with pytest.raises(JobCanceled):
        executor.run(define(agen), {}, FakeCtx(cancel_after=2))
    assert cleaned == ["closed"]


@pytest.mark.parametrize("kind", ["function", "coroutine", "generator", "async_generator"])
def test_exceptions_propagate_from_every_kind(executor: Executor, kind: str) -> None:
    def function(args: dict[str, Any]) -> None:
        raise KeyError("f")

    async def coroutine(args: dict[str, Any]) -> None:
        raise KeyError("c")

    def generator(args: dict[str, Any]) -> Iterator[None]:
        yield None
        raise KeyError("g")

    async def async_generator(args: dict[str, Any]) -> AsyncIterator[None]:
        yield None
        raise KeyError("a")

    handlers = {
        "function": function,
        "coroutine": coroutine,
        "generator": generator,
        "async_generator": async_generator,
    }
    definition = define(handlers[kind])
    assert definition.kind == kind
    with pytest.raises(KeyError):
        executor.run(definition, {}, FakeCtx())


# -- settings ---------------------------------------------------------------------


def test_settings_from_env_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUE_ENGINE_POLL_S", "0.25")
    monkeypatch.setenv("QUEUE_ENGINE_HEARTBEAT_S", "5")
    monkeypatch.setenv("QUEUE_ENGINE_LEASE_TTL_S", "30")
    monkeypatch.setenv("QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT", "ON")
    settings = WorkerSettings.from_env(queue="q1", app="mod", prefetch=4)
    assert (settings.poll_s, settings.heartbeat_s, settings.lease_ttl_s) == (0.25, 5.0, 30)
    assert settings.synchronous_commit == "on" and settings.prefetch == 4


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"QUEUE_ENGINE_POLL_S": "soon"}, "QUEUE_ENGINE_POLL_S"),
        ({"QUEUE_ENGINE_LEASE_TTL_S": "5", "QUEUE_ENGINE_HEARTBEAT_S": "10"}, "longer than"),
        ({"QUEUE_ENGINE_WORKER_SYNCHRONOUS_COMMIT": "maybe"}, "one of on, off"),
        ({"QUEUE_ENGINE_LEASE_TTL_S": "1.5"}, "whole number"),
    ],
)
def test_bad_settings_are_refused_with_the_variable_named(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=message):
        WorkerSettings.from_env(queue="q1", app="mod")


def test_bad_queue_and_prefetch_are_refused() -> None:
    with pytest.raises(ConfigError, match="--queue"):
        WorkerSettings(queue="bad queue!", app="m")
    with pytest.raises(ConfigError, match="--prefetch"):
        WorkerSettings(queue="q", app="m", prefetch=0)


# -- logs -------------------------------------------------------------------------


def test_mask_secrets_is_case_insensitive_and_recursive() -> None:
    args = {
        "Password": "p",
        "db_TOKEN": "t",
        "nested": {"client_secret": "s", "items": [{"api_key": "k"}], "keep": 1},
        "Authorization": "Bearer x",
        "name": "visible",
    }
    assert mask_secrets(args) == {
        "Password": "***",
        "db_TOKEN": "***",
        "nested": {"client_secret": "***", "items": [{"api_key": "***"}], "keep": 1},
        "Authorization": "***",
        "name": "visible",
    }
    assert args["Password"] == "p"  # the input is not modified


def test_json_formatter_puts_event_fields_at_top_level() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("test.worker.json")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = Keep()
    logger.addHandler(handler)
    try:
        log_event(logger, logging.INFO, "job.succeeded", job_id=1, task="t", duration_ms=3)
        logger.info("plain %s", "message")
    finally:
        logger.removeHandler(handler)
    first = json.loads(JsonFormatter().format(records[0]))
    assert first["event"] == "job.succeeded" and first["job_id"] == 1 and first["level"] == "info"
    second = json.loads(JsonFormatter().format(records[1]))
    assert second["event"] == "log" and second["message"] == "plain message"


# -- heartbeat cadence ---------------------------------------------------------------


class FakeTarget:
    def __init__(self) -> None:
        self.beats = 0
        self.polls = 0
        self.pending = False
        self.running = False

    def register(self) -> str:
        return "idle"

    def beat(self) -> str:
        self.beats += 1
        self.pending = False
        return "idle"

    def mark_stopped(self) -> None:
        pass

    def period_s(self) -> float:
        return 10.0

    def progress_pending(self) -> bool:
        return self.pending

    def job_running(self) -> bool:
        return self.running

    def poll_notifications(self) -> None:
        self.polls += 1


def test_heartbeat_beats_on_its_cadence_and_flushes_progress_early() -> None:
    now = [100.0]
    target = FakeTarget()
    hb = Heartbeat(
        target,
        interval_s=10.0,
        progress_interval_s=0.5,
        timing=Timing(clock=lambda: now[0], wait=lambda event, s: False),
    )
    assert not hb.run_once().beat  # just started: not due
    now[0] += 9.9
    assert not hb.run_once().beat
    now[0] += 0.1
    assert hb.run_once().beat and target.beats == 1
    # Progress is written early, but not more often than every 0.5 s.
    target.pending = True
    now[0] += 0.3
    assert not hb.run_once().beat
    now[0] += 0.2
    assert hb.run_once().beat and target.beats == 2
    # Notifications are polled only while a job runs.
    assert target.polls == 0
    target.running = True
    hb.run_once()
    assert target.polls == 1


def test_heartbeat_stop_is_safe_before_start_and_twice() -> None:
    hb = Heartbeat(FakeTarget(), interval_s=1.0, timing=Timing(wait=lambda e, s: e.wait(0.01)))
    hb.stop()
    hb.start()
    hb.stop()
    hb.stop()
    assert not hb.running
    assert threading.active_count() >= 1


def _context(canceled: list[bool], beats: list[int]) -> Any:
    from datetime import UTC, datetime

    from queue_engine.producer.context import ClaimedJob, JobContext

    job = ClaimedJob(1, "q", "t", {}, 1, 3, 100, None, None, None, datetime.now(UTC))
    return JobContext(
        job,
        worker_id="w",
        dsn="",
        schema="queue_engine",
        report_progress=lambda data: None,
        is_canceled=lambda: canceled[0],
        beat=lambda: beats.append(1),
    )


def test_ctx_beat_is_a_progress_beat_and_a_cancel_checkpoint() -> None:
    canceled, beats = [False], []
    ctx = _context(canceled, beats)
    ctx.beat()
    ctx.progress({"x": 1})
    assert ctx.checkpoint(None) is False
    assert len(beats) == 3  # every kind of checkpoint feeds the stall watchdog
    canceled[0] = True
    with pytest.raises(JobCanceled):
        ctx.beat()
    assert ctx.checkpoint({"y": 2}) is True  # a yield reports, the executor stops


@pytest.mark.parametrize(
    "name", ["default_timeout_s", "shutdown_grace_s", "cancel_grace_s", "zombie_grace_s"]
)
def test_liveness_settings_refuse_negative_values(name: str) -> None:
    with pytest.raises(ConfigError):
        WorkerSettings(queue="q", app="a", **{name: -1.0})


def test_liveness_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUEUE_ENGINE_SHUTDOWN_GRACE_S", "5")
    monkeypatch.setenv("QUEUE_ENGINE_CANCEL_GRACE_S", "2")
    monkeypatch.setenv("QUEUE_ENGINE_ZOMBIE_GRACE_S", "1")
    monkeypatch.setenv("QUEUE_ENGINE_DEFAULT_TIMEOUT_S", "60")
    s = WorkerSettings.from_env(queue="q", app="a")
    assert (s.shutdown_grace_s, s.cancel_grace_s, s.zombie_grace_s, s.default_timeout_s) == (
        5.0,
        2.0,
        1.0,
        60.0,
    )
    monkeypatch.setenv("QUEUE_ENGINE_SHUTDOWN_GRACE_S", "soon")
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_SHUTDOWN_GRACE_S"):
        WorkerSettings.from_env(queue="q", app="a")
