"""Contract of the shared daemon runtime (:mod:`queue_engine.daemon`).

Process ids keep their formats; waiting for the database follows the one
startup backoff and ends at the deadline (the last wait is cut to it, so a
10 s window gives up at 10 s); services start in order after the heartbeat's
registration and stop in reverse with the heartbeat last; stop is safe twice
and before start; a service that fails to start stops the ones before it; a
second SIGTERM exits 130 through the injected exit function; READY, STATUS,
WATCHDOG and STOPPING come from the runtime. No database and no real
waiting: clocks, sleeps, the beat target and the notifier are fakes.
"""

from __future__ import annotations

import logging
import re
import signal
from collections.abc import Callable, Iterator

import pytest
from support.timing import FakeTiming

from queue_engine.daemon import (
    EXIT_INTERRUPTED,
    STARTUP_BACKOFF,
    DaemonRuntime,
    StopRequested,
    process_id,
    wait_for_database,
)
from queue_engine.errors import DatabaseUnavailable
from queue_engine.systemd import SystemdNotifier

# -- fakes -------------------------------------------------------------------------


class Recorder:
    """One ordered log of what the fakes saw."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def lifecycle(self) -> list[str]:
        """Everything but the (timing-dependent) repeated beats."""
        return [e for e in self.events if e != "beat"]


class FakeTarget:
    """A beat target that records instead of writing a workers row."""

    def __init__(self, rec: Recorder, fail: bool = False) -> None:
        self.rec = rec
        self.fail = fail

    def register(self) -> str:
        return self.beat()

    def beat(self) -> str:
        if self.fail:
            raise DatabaseUnavailable("cannot connect to the database at nowhere")
        self.rec.events.append("beat")
        return "state"

    def mark_stopped(self) -> None:
        self.rec.events.append("mark_stopped")


class FakeComponent:
    def __init__(self, name: str, rec: Recorder, *, fail_start: bool = False) -> None:
        self.name = name
        self.rec = rec
        self.fail_start = fail_start
        self.on_start: Callable[[], None] | None = None

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.rec.events.append(f"start {self.name}")
        if self.on_start is not None:
            self.on_start()

    def stop(self, timeout: float | None = None) -> None:
        self.rec.events.append(f"stop {self.name}")


class FakeNotifier(SystemdNotifier):
    """A notifier 'under systemd' that records the lines instead of sending them."""

    def __init__(self) -> None:
        super().__init__("/run/fake-notify-socket")
        self.lines: list[str] = []

    def notify(self, *lines: str) -> bool:
        self.lines.extend(lines)
        return True


def make_runtime(
    rec: Recorder,
    *,
    target: FakeTarget | None = None,
    notifier: SystemdNotifier | None = None,
    exits: list[int] | None = None,
    environ: dict[str, str] | None = None,
    healthy: Callable[[], bool] = lambda: True,
) -> DaemonRuntime:
    def fake_exit(code: int) -> None:
        (exits if exits is not None else []).append(code)

    return DaemonRuntime(
        "scheduler",
        dsn="",
        schema="queue_engine",
        state=lambda: "running",
        status=lambda: "all good",
        heartbeat_s=3600.0,  # the loop beats once, then waits for stop
        beat_target=target or FakeTarget(rec),
        notifier=notifier or FakeNotifier(),
        environ=environ if environ is not None else {},
        exit=fake_exit,
        status_poll_s=0.01,
        healthy=healthy,
    )


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """``run`` installs SIGTERM/SIGINT handlers: give the test process its own back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


# -- identity ----------------------------------------------------------------------


def test_process_id_formats_match_the_rows_operators_know() -> None:
    assert re.fullmatch(r"h1:42:[0-9a-f]{6}", process_id("worker", host="h1", pid=42))
    assert re.fullmatch(
        r"orchestrator@h1:42:[0-9a-f]{6}", process_id("orchestrator", host="h1", pid=42)
    )
    assert re.fullmatch(r"scheduler@h1:42:[0-9a-f]{6}", process_id("scheduler", host="h1", pid=42))
    # Unique per process start, not per pid (pids are reused across restarts).
    assert len({process_id("scheduler", host="h", pid=1) for _ in range(20)}) == 20
    with pytest.raises(ValueError):
        process_id("bad@role")


# -- waiting for the database ------------------------------------------------------


def failing(clock: FakeTiming, times: int, cost_s: float = 0.0) -> Callable[[], str]:
    """A probe that fails ``times`` times (each attempt taking ``cost_s``), then answers."""
    calls = {"n": 0}

    def probe() -> str:
        clock.now += cost_s
        calls["n"] += 1
        if calls["n"] <= times:
            raise DatabaseUnavailable("cannot connect to the database at nowhere")
        return "connected"

    return probe


def test_wait_for_database_follows_the_startup_backoff() -> None:
    clock = FakeTiming()
    first: list[str] = []
    got = wait_for_database(
        failing(clock, 5),
        retry_s=60.0,
        on_first_failure=lambda exc: first.append(str(exc)),
        clock=clock,
        sleep=clock.sleep,
        rand=lambda: 0.5,  # no jitter
    )
    assert got == "connected"
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 2.0]
    assert clock.sleeps == [STARTUP_BACKOFF.delay(n, lambda: 0.5) for n in range(1, 6)]
    assert len(first) == 1  # one warning line, however long the wait


def test_the_last_wait_is_cut_to_the_deadline() -> None:
    clock = FakeTiming()
    started = clock.now
    with pytest.raises(DatabaseUnavailable):
        wait_for_database(
            failing(clock, 1000),
            retry_s=10.0,
            clock=clock,
            sleep=clock.sleep,
            rand=lambda: 0.99,  # the longest jitter: the uncut schedule would overshoot most
        )
    # Uncut: 0.31 + 0.62 + 1.25 + 2.49 * 3 = 9.65 s of sleeps, then 2.49 s more (12.1 s).
    assert clock.now - started == pytest.approx(10.0)
    assert clock.sleeps[-1] < STARTUP_BACKOFF.delay(10, lambda: 0.99)
    assert sum(clock.sleeps) == pytest.approx(10.0)


def test_slow_attempts_count_against_the_deadline() -> None:
    clock = FakeTiming()
    started = clock.now
    with pytest.raises(DatabaseUnavailable):
        wait_for_database(
            failing(clock, 1000, cost_s=3.0),
            retry_s=10.0,
            clock=clock,
            sleep=clock.sleep,
            rand=lambda: 0.0,
        )
    # Attempts at 0-3, 3.19-6.19, 6.56-9.56, a wait cut to 0.44 s, the last at 10-13.
    assert clock.sleeps == pytest.approx([0.1875, 0.375, 0.4375])
    assert clock.now - started == pytest.approx(13.0)


def test_no_retry_window_fails_at_once() -> None:
    clock = FakeTiming()
    with pytest.raises(DatabaseUnavailable):
        wait_for_database(failing(clock, 1), retry_s=0.0, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_a_stop_request_ends_the_wait() -> None:
    clock = FakeTiming()
    stop = {"now": False}

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        stop["now"] = True

    with pytest.raises(StopRequested):
        wait_for_database(
            failing(clock, 1000),
            retry_s=60.0,
            stopping=lambda: stop["now"],
            clock=clock,
            sleep=sleep,
        )
    assert len(clock.sleeps) == 1


# -- lifecycle ---------------------------------------------------------------------


def test_services_start_in_order_after_registration_and_stop_in_reverse() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    runtime.services = [FakeComponent(n, rec) for n in "abc"]
    assert runtime.row_state() == "starting"
    runtime.start()
    assert rec.events[0] == "beat"  # registered before anything else started
    assert runtime.heartbeat.running
    assert runtime.row_state() == "running"
    assert runtime.stop() is True
    assert rec.lifecycle() == [
        "start a",
        "start b",
        "start c",
        "stop c",
        "stop b",
        "stop a",
        "mark_stopped",  # after the heartbeat's loop ended: nothing beats over it
    ]
    assert not runtime.heartbeat.running
    assert runtime.row_state() == "stopping"


def test_stop_is_safe_before_start_and_twice() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    runtime.services = [FakeComponent("a", rec)]
    assert runtime.stop() is False
    assert rec.events == []
    runtime.start()
    runtime.start()  # idempotent
    assert runtime.stop() is True
    assert runtime.stop() is False
    assert rec.lifecycle() == ["start a", "stop a", "mark_stopped"]


def test_a_service_failing_to_start_stops_the_ones_before_it() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    runtime.services = [
        FakeComponent("a", rec),
        FakeComponent("b", rec),
        FakeComponent("c", rec, fail_start=True),
    ]
    with pytest.raises(RuntimeError, match="c cannot start"):
        runtime.start()
    assert rec.lifecycle() == ["start a", "start b", "stop b", "stop a"]
    assert not runtime.heartbeat.running
    runtime.stop()
    assert rec.lifecycle()[-1] == "mark_stopped"


def test_registration_failure_starts_nothing() -> None:
    rec = Recorder()
    runtime = make_runtime(rec, target=FakeTarget(rec, fail=True))
    runtime.services = [FakeComponent("a", rec)]
    with pytest.raises(DatabaseUnavailable):
        runtime.start()
    assert rec.events == []
    assert runtime.stop() is False
    assert rec.events == []


# -- signals -----------------------------------------------------------------------


def test_first_signal_stops_gracefully_the_second_exits_130(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = Recorder()
    exits: list[int] = []
    runtime = make_runtime(rec, exits=exits)
    runtime.signals.handle(signal.SIGTERM)
    assert runtime.stop_requested
    assert exits == []
    with caplog.at_level(logging.WARNING):
        runtime.signals.handle(signal.SIGINT)
    assert exits == [EXIT_INTERRUPTED] == [130]
    assert any(
        r.getMessage() == "scheduler.exit_now signal=SIGINT exit_code=130" for r in caplog.records
    )


def test_a_stop_while_preparing_exits_0_with_stopping(keep_signal_handlers: None) -> None:
    rec = Recorder()
    notifier = FakeNotifier()
    runtime = make_runtime(rec, notifier=notifier)

    def prepare() -> None:
        runtime.signals.handle(signal.SIGTERM)
        runtime.sleep(60.0)  # interrupted at once: raises StopRequested

    assert runtime.run(prepare) == 0
    assert rec.events == []  # never registered
    assert notifier.lines == ["STOPPING=1"]


def test_an_unreachable_database_while_preparing_propagates(keep_signal_handlers: None) -> None:
    runtime = make_runtime(Recorder())

    def prepare() -> None:
        raise DatabaseUnavailable("cannot connect to the database at nowhere")

    with pytest.raises(DatabaseUnavailable):
        runtime.run(prepare)


def test_run_notifies_ready_then_stopping_and_stops_in_reverse(
    keep_signal_handlers: None,
) -> None:
    rec = Recorder()
    notifier = FakeNotifier()
    runtime = make_runtime(rec, notifier=notifier)
    last = FakeComponent("b", rec)
    last.on_start = runtime.request_stop  # as if SIGTERM came right after start-up
    runtime.services = [FakeComponent("a", rec), last]
    assert runtime.run() == 0
    assert rec.lifecycle() == ["start a", "start b", "stop b", "stop a", "mark_stopped"]
    assert notifier.lines[:2] == ["READY=1", "STATUS=all good"]
    assert notifier.lines[-2:] == ["STOPPING=1", "STATUS=stopping"]


# -- systemd -----------------------------------------------------------------------


def test_watchdog_pings_come_before_the_beat_and_only_while_healthy() -> None:
    rec = Recorder()
    notifier = FakeNotifier()
    health = {"ok": True}
    runtime = make_runtime(
        rec,
        notifier=notifier,
        environ={"WATCHDOG_USEC": "2000000"},
        healthy=lambda: health["ok"],
    )
    assert runtime.systemd.ping_interval_s == 1.0
    assert runtime.heartbeat.interval_s == 1.0  # beats at least as often as a ping is due
    assert runtime.heartbeat.backoff_max_s == 1.0  # ... also while its writes fail
    runtime.heartbeat.run_once()
    assert notifier.lines == ["WATCHDOG=1"]
    health["ok"] = False
    runtime.heartbeat.run_once()
    assert notifier.lines == ["WATCHDOG=1"]


def test_no_pings_outside_systemd_or_without_a_watchdog() -> None:
    rec = Recorder()
    notifier = FakeNotifier()
    runtime = make_runtime(rec, notifier=notifier, environ={})
    assert runtime.systemd.ping_interval_s is None
    assert runtime.heartbeat.interval_s == 3600.0
    runtime.heartbeat.run_once()
    assert notifier.lines == []
    outside = make_runtime(rec, notifier=SystemdNotifier(""), environ={"WATCHDOG_USEC": "2000000"})
    assert outside.systemd.ping_interval_s is None


def test_status_is_sent_only_when_it_changes() -> None:
    notifier = FakeNotifier()
    runtime = make_runtime(Recorder(), notifier=notifier)
    runtime.systemd.ready("one")
    runtime.systemd.status("one")
    runtime.systemd.status("two")
    runtime.systemd.status("two")
    assert notifier.lines == ["READY=1", "STATUS=one", "STATUS=two"]
