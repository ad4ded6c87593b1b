"""Contract of the shared daemon runtime (:mod:`queue_engine.daemon`).

Process ids keep their formats; waiting for the database follows the one
startup backoff and ends at the deadline (the last wait is cut to it, so a
10 s window gives up at 10 s); services start in order after the heartbeat's
registration and stop in reverse with the heartbeat last; stop is safe twice
and before start; a service that fails to start stops the ones before it; a
second SIGTERM exits 130 through the injected exit function, a first one
after the daemon stopped itself does not; a foreground (the worker's main
loop) runs on the calling thread and its return is the exit code; READY,
STATUS, WATCHDOG and STOPPING come from the runtime, STATUS from the
heartbeat's ticks while a foreground holds the main thread; the claim worker
is a role of the runtime. No database and no real waiting: clocks, sleeps,
the beat target and the notifier are fakes.
"""

from __future__ import annotations

import logging
import re
import signal
from collections.abc import Callable, Iterator

import pytest
from support.timing import FakeTiming

from queue_engine.daemon import (
    DAEMON_ROLES,
    EXIT_INTERRUPTED,
    STARTUP_BACKOFF,
    DaemonRuntime,
    StopRequested,
    StopSignals,
    process_id,
    wait_for_database,
)
from queue_engine.daemon.heartbeat import TICK_S, Heartbeat, HeartbeatResult
from queue_engine.daemon.service import REAL_TIMING, Timing
from queue_engine.daemon.systemd import SystemdNotifier
from queue_engine.foundation.errors import DatabaseUnavailable
from queue_engine.producer.tasks import TaskRegistry
from queue_engine.worker import Worker, WorkerSettings
from queue_engine.worker.liveness import Liveness

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
    status: Callable[[], str] = lambda: "all good",
    on_stop: Callable[[], None] | None = None,
    timing: Timing = REAL_TIMING,
) -> DaemonRuntime:
    def fake_exit(code: int) -> None:
        (exits if exits is not None else []).append(code)

    return DaemonRuntime(
        "scheduler",
        dsn="",
        schema="queue_engine",
        state=lambda: "running",
        status=status,
        heartbeat_s=3600.0,  # the loop beats once, then waits for stop
        beat_target=target or FakeTarget(rec),
        notifier=notifier or FakeNotifier(),
        environ=environ if environ is not None else {},
        exit=fake_exit,
        status_poll_s=0.01,
        healthy=healthy,
        on_stop=on_stop,
        timing=timing,
    )


@pytest.fixture
def keep_signal_handlers() -> Iterator[None]:
    """``main`` installs SIGTERM/SIGINT handlers: give the test process its own back."""
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


def test_a_daemon_that_stopped_itself_takes_the_first_signal_as_graceful() -> None:
    """A worker stops itself (a recycling limit, ``queue-ctl stop``) on the stop event the
    signals set: the SIGTERM its supervisor sends meanwhile must not cut the shutdown short."""
    exits: list[int] = []
    signals = StopSignals("worker", exit=exits.append)
    signals.request_stop()
    signals.handle(signal.SIGTERM)
    assert exits == []
    signals.handle(signal.SIGTERM)
    assert exits == [EXIT_INTERRUPTED]


def test_on_stop_runs_once_at_the_first_request_after_the_event_is_set() -> None:
    seen: list[bool] = []
    runtime = make_runtime(Recorder(), on_stop=lambda: seen.append(runtime.stop_requested))
    runtime.request_stop()
    runtime.request_stop()
    runtime.signals.handle(signal.SIGTERM)
    assert seen == [True]


# -- the one heartbeat -------------------------------------------------------------


class TickingTarget(FakeTarget):
    """A target with a cadence of its own (the worker's shape); its beats may fail."""

    def __init__(self, rec: Recorder) -> None:
        super().__init__(rec)
        self.polls = 0

    def period_s(self) -> float:
        return 10.0

    def progress_pending(self) -> bool:
        return False

    def job_running(self) -> bool:
        return True

    def poll_notifications(self) -> None:
        self.polls += 1


def test_a_plain_target_is_beaten_every_tick_and_its_failure_raises() -> None:
    rec = Recorder()
    heartbeat = Heartbeat(FakeTarget(rec), interval_s=10.0, max_tick_s=4.0)
    assert heartbeat.cadence is None
    assert heartbeat.interval_s == 4.0  # a tick at least every ping interval
    assert heartbeat.run_once().state == "state"
    assert heartbeat.run_once().beat
    assert rec.events == ["beat", "beat"]
    heartbeat.target = FakeTarget(rec, fail=True)
    with pytest.raises(DatabaseUnavailable):  # the service logs heartbeat.error and backs off
        heartbeat.run_once()


def test_a_cadence_target_ticks_between_beats_and_a_failed_beat_keeps_the_ticks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = Recorder()
    fake = FakeTiming()
    target = TickingTarget(rec)
    heartbeat = Heartbeat(target, interval_s=10.0, timing=fake.timing)
    assert heartbeat.cadence is target and heartbeat.interval_s == TICK_S
    assert not heartbeat.run_once().beat  # a tick: a poll, no beat
    assert target.polls == 1
    fake.advance(10.0)
    assert heartbeat.run_once() == HeartbeatResult(beat=True, state="state")
    target.fail = True
    fake.advance(10.0)
    with caplog.at_level(logging.WARNING):
        failed = heartbeat.run_once()  # no exception: the ticks must go on
    assert not failed.beat and heartbeat.next_interval(failed) == TICK_S
    assert "heartbeat.failed" in caplog.text
    assert rec.events == ["beat"]


# -- a foreground ------------------------------------------------------------------


def test_a_foreground_runs_once_started_and_its_return_is_the_exit_code() -> None:
    rec = Recorder()
    notifier = FakeNotifier()
    runtime = make_runtime(rec, notifier=notifier)
    runtime.services = [FakeComponent("a", rec)]
    handler = signal.getsignal(signal.SIGTERM)

    def foreground() -> int:
        rec.events.append("foreground")
        assert runtime.phase == "running"
        assert notifier.lines[:2] == ["READY=1", "STATUS=all good"]
        return 79

    assert runtime.run(foreground=foreground) == 79
    assert rec.lifecycle() == ["start a", "foreground", "stop a", "mark_stopped"]
    assert notifier.lines[-2:] == ["STOPPING=1", "STATUS=stopping"]
    assert signal.getsignal(signal.SIGTERM) is handler  # run installs no handler: any thread


def test_main_installs_the_stop_signals_around_the_same_life(keep_signal_handlers: None) -> None:
    runtime = make_runtime(Recorder())

    def foreground() -> int:
        assert signal.getsignal(signal.SIGTERM) == runtime.signals.handle
        return 0

    assert runtime.main(foreground=foreground) == 0


def test_a_foreground_that_raises_still_stops_everything() -> None:
    rec = Recorder()
    runtime = make_runtime(rec)
    runtime.services = [FakeComponent("a", rec)]

    def foreground() -> int:
        raise RuntimeError("a bug in the main loop")

    with pytest.raises(RuntimeError, match="a bug"):
        runtime.run(foreground=foreground)
    assert rec.lifecycle() == ["start a", "stop a", "mark_stopped"]


def test_a_stop_while_registering_is_a_clean_exit() -> None:
    """The worker's registration retries its connection until it works or a stop (StopRequested)."""
    rec = Recorder()
    notifier = FakeNotifier()
    target = FakeTarget(rec)

    def register() -> str:
        raise StopRequested()

    target.register = register  # type: ignore[method-assign]
    runtime = make_runtime(rec, target=target, notifier=notifier)
    assert runtime.run(foreground=lambda: 79) == 0
    assert rec.events == []
    assert notifier.lines == ["STOPPING=1", "STATUS=stopping"]


def test_while_a_foreground_holds_the_main_thread_the_ticks_send_the_status() -> None:
    notifier = FakeNotifier()
    text = {"now": "starting"}
    runtime = make_runtime(Recorder(), notifier=notifier, status=lambda: text["now"])
    text["now"] = "idle"
    runtime.heartbeat.run_once()
    assert notifier.lines == []  # no foreground: the main thread sends STATUS

    def foreground() -> int:
        text["now"] = "running job 7"
        runtime.heartbeat.run_once()
        return 0

    runtime.run(foreground=foreground)
    assert "STATUS=running job 7" in notifier.lines


# -- the claim worker --------------------------------------------------------------


def test_the_claim_worker_is_a_role_of_the_runtime() -> None:
    exits: list[int] = []
    worker = Worker(WorkerSettings.from_env(queue="q", app="a"), TaskRegistry(), exit=exits.append)
    runtime = worker.runtime
    assert "worker" in DAEMON_ROLES
    assert (runtime.role, runtime.id) == ("worker", worker.worker_id)
    # The worker's beat is the heartbeat's target, with the tick cadence.
    assert runtime.heartbeat.target is worker.renewer
    assert runtime.heartbeat.cadence is worker.renewer
    assert runtime.heartbeat.interval_s == TICK_S
    assert runtime.heartbeat.heartbeat_s == worker.settings.heartbeat_s
    # One stop event: the runtime's, which the worker's parts wait on.
    assert worker.connection._stopping is runtime.signals.event
    worker.stop()
    worker.stop()
    assert worker.stopping and runtime.stop_requested
    assert worker.run() == 0  # stopped before it started: nothing touched, exit 0
    runtime.signals.handle(signal.SIGTERM)
    assert exits == []  # its own stop, then a first signal: still graceful


class Helper:
    """The job watchdog as the health gate sees it: alive, and when it last ticked."""

    def __init__(self, fake: FakeTiming) -> None:
        self.alive = True
        self.last_tick = fake.now


def test_the_workers_health_gate_wants_recent_signs_of_life_from_its_loops() -> None:
    fake = FakeTiming()
    helper = Helper(fake)
    busy = {"now": False}
    gate = Liveness(helper, busy=lambda: busy["now"], within_s=2.0, clock=fake.clock)
    assert gate.healthy()
    fake.advance(2.5)  # the main loop showed no sign of life for longer than WatchdogSec
    helper.last_tick = fake.now
    assert not gate.healthy()
    busy["now"] = True  # ... which a running handler need not: a long job is the watchdog's
    assert gate.healthy()
    gate.mark_alive()
    busy["now"] = False
    assert gate.healthy()
    fake.advance(2.5)  # every thread frozen: the watchdog thread did not tick either
    gate.mark_alive()
    assert not gate.healthy()
    helper.last_tick = fake.now
    helper.alive = False
    assert not gate.healthy()


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


def test_a_ping_is_due_every_half_interval_however_often_the_heartbeat_ticks() -> None:
    """The worker's heartbeat ticks four times a second: its pings come every quarter of
    ``WatchdogSec``, not at every tick; a daemon ticking once per interval pings every tick."""
    fake = FakeTiming()
    notifier = FakeNotifier()
    runtime = make_runtime(
        Recorder(), notifier=notifier, environ={"WATCHDOG_USEC": "2000000"}, timing=fake.timing
    )
    systemd = runtime.systemd
    assert systemd.ping_interval_s == 1.0 and systemd.watchdog_s == 2.0
    assert systemd.ping_due()
    systemd.ping()
    fake.advance(0.25)
    assert not systemd.ping_due()
    fake.advance(0.25)
    assert systemd.ping_due()
    runtime.heartbeat.run_once()
    fake.advance(0.49)
    runtime.heartbeat.run_once()
    fake.advance(0.51)
    runtime.heartbeat.run_once()
    assert notifier.lines == ["WATCHDOG=1"] * 3


def test_status_is_sent_only_when_it_changes() -> None:
    notifier = FakeNotifier()
    runtime = make_runtime(Recorder(), notifier=notifier)
    runtime.systemd.ready("one")
    runtime.systemd.status("one")
    runtime.systemd.status("two")
    runtime.systemd.status("two")
    assert notifier.lines == ["READY=1", "STATUS=one", "STATUS=two"]
