"""``queue-ctl up``: the restart policy (injected clock, no processes) and the fleet config."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.timing import FakeTiming

from queue_engine.cli.up import FleetSpec, build_config, child_specs, read_file, throttled
from queue_engine.foundation.errors import ConfigError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.restarts import Decision, RestartPolicy, Verdict, describe_exit


def policy(clock: FakeTiming) -> RestartPolicy:
    return RestartPolicy(
        base_delay_s=0.5, max_delay_s=4.0, give_up_after=5, window_s=60.0, clock=clock
    )


def test_exit_descriptions_name_the_code_or_the_signal() -> None:
    assert describe_exit(75) == "exit 75 (WATCHDOG)"
    assert describe_exit(-signal.SIGKILL) == "killed by SIGKILL"
    assert describe_exit(0) == "exit 0 (OK)"
    assert describe_exit(9) == "exit 9"


def test_crashes_back_off_exponentially_capped_per_child() -> None:
    clock = FakeTiming()
    p = policy(clock)
    delays = [p.decide("w1", 70, stop_requested=False).delay_s for _ in range(4)]
    assert delays == [0.5, 1.0, 2.0, 4.0]
    # Another child has its own count.
    other = p.decide("w2", -9, stop_requested=False)
    assert other == Decision(
        Verdict.RESTART, "crashed: killed by SIGKILL, restarting in 0.5 s", 0.5
    )


def test_too_many_quick_crashes_give_up_but_old_crashes_are_forgotten() -> None:
    clock = FakeTiming()
    p = policy(clock)
    for _ in range(4):
        assert p.decide("w", 1, stop_requested=False).verdict is Verdict.RESTART
        clock.now += 10
    gave_up = p.decide("w", 1, stop_requested=False)
    assert gave_up.verdict is Verdict.GIVE_UP
    assert "crashed 5 times in 60 s" in gave_up.reason

    fresh = policy(clock)
    for _ in range(4):
        fresh.decide("w", 1, stop_requested=False)
        clock.now += 30  # spread out: at most two in any window
    again = fresh.decide("w", 1, stop_requested=False)
    assert again.verdict is Verdict.RESTART
    assert again.delay_s == 1.0


def test_recycle_restarts_at_once_and_is_not_a_crash() -> None:
    clock = FakeTiming()
    p = policy(clock)
    for _ in range(10):
        d = p.decide("w", ExitCode.RECYCLE, stop_requested=False)
        assert (d.verdict, d.delay_s) == (Verdict.RESTART, 0.0)
    assert p.decide("w", 70, stop_requested=False).delay_s == 0.5


def test_clean_stops_and_usage_errors_are_not_restarted() -> None:
    p = policy(FakeTiming())
    assert p.decide("w", 0, stop_requested=True).verdict is Verdict.DONE
    assert p.decide("w", -15, stop_requested=True).verdict is Verdict.DONE
    assert p.decide("w", 0, stop_requested=False).verdict is Verdict.DONE
    usage = p.decide("w", 2, stop_requested=False)
    assert usage.verdict is Verdict.GIVE_UP and "USAGE" in usage.reason


def test_flags_and_file_merge_flags_win() -> None:
    data = {"app": "myapp.tasks", "queues": {"load.cbr": 2, "email": 1}, "env": {"X": 1, "B": True}}
    config = build_config(data, None, ["email=3", "extra"])
    assert config == FleetSpec(
        app="myapp.tasks",
        queues={"load.cbr": 2, "email": 3, "extra": 1},
        env={"X": "1", "B": "true"},
    )
    assert build_config(data, "other", []).app == "other"


def test_toml_and_json_files(tmp_path: Path) -> None:
    toml = tmp_path / "fleet.toml"
    toml.write_text('app = "a.b"\n[queues]\n"load.cbr" = 2\nemail = 1\n[env]\nK = "v"\n')
    assert build_config(read_file(toml), None, []) == FleetSpec(
        "a.b", {"load.cbr": 2, "email": 1}, {"K": "v"}
    )
    js = tmp_path / "fleet.json"
    js.write_text('{"app": "a.b", "queues": {"q": 2}}')
    assert build_config(read_file(js), None, []).queues == {"q": 2}


def test_pythonpath_is_relative_to_the_file_and_goes_first(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    toml = tmp_path / "fleet.toml"
    toml.write_text('app = "a"\npythonpath = ["app", "."]\n[queues]\nq = 1\n')
    config = build_config(read_file(toml), None, [], folder=tmp_path)
    assert config.pythonpath == (str(tmp_path / "app"), str(tmp_path))
    env = config.environment({"PYTHONPATH": "/already", "HOME": "/h"})
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "app"), str(tmp_path), "/already"])
    assert env["HOME"] == "/h"
    single = build_config(
        {"app": "a", "queues": {"q": 1}, "pythonpath": "."}, None, [], folder=tmp_path
    )
    assert single.pythonpath == (str(tmp_path),)
    assert build_config({"app": "a", "queues": {"q": 1}}, None, []).environment({}) == {}


@pytest.mark.parametrize(
    ("data", "flags", "message"),
    [
        ({"app": "a", "queue": {"q": 1}}, [], "unknown key 'queue', did you mean 'queues'?"),
        ({"app": "a", "queues": {"q": 0}}, [], "must be a whole number from 1 to 64"),
        ({"app": "a", "queues": {"q": "2"}}, [], "not '2'"),
        ({"app": "a", "queues": []}, [], "'queues' must be a table"),
        ({"app": "a"}, ["q=x"], "N must be a whole number"),
        ({"app": "a"}, ["=2"], "expected NAME=N"),
        ({"queues": {"q": 1}}, [], "no app module"),
        ({"app": "a"}, [], "no queue to work"),
        ({"app": "a", "queues": {"q": 1}, "env": {"K": [1]}}, [], "must be a string"),
        ({"app": "a", "queues": {"q": 1}, "pythonpath": [1]}, [], "'pythonpath' must be a folder"),
    ],
)
def test_bad_config_is_one_clear_line(
    data: dict[str, object], flags: list[str], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        build_config(data, None, flags)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert raised.value.exit_code == ExitCode.USAGE


def test_unreadable_or_invalid_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        read_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("app = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_file(bad)


def test_children_are_orchestrator_scheduler_and_named_workers() -> None:
    config = FleetSpec("a.b", {"email": 2, "load.cbr": 1})
    names = [s.name for s in child_specs(config, "dbname=x", "qe", {})]
    assert names == [
        "orchestrator",
        "scheduler",
        "worker:email#1",
        "worker:email#2",
        "worker:load.cbr#1",
    ]
    worker = child_specs(config, "dbname=x", "qe", {})[2]
    assert worker.reloadable and "--queue=email" in worker.argv and "a.b" in worker.argv


def test_reload_check_is_throttled() -> None:
    clock = FakeTiming()
    calls: list[float] = []

    def check() -> bool:
        calls.append(clock.now)
        return True

    throttled_check = throttled(check, 1.0, clock)
    assert throttled_check() is False
    clock.now += 1.0
    assert throttled_check() is True
    assert throttled_check() is False
    assert calls == [1001.0]
