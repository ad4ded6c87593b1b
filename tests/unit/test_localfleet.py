"""The local fleet's record: found while its ``up`` runs, never when a DSN or server was named.

queue_engine/foundation/localfleet.py is how a second shell finds ``queue-ctl up``'s
embedded database. These tests write records as ``up`` does (``recorded``)
or by hand, in a private folder of the test's own, and check what ``find``
and ``resolve`` make of them. A record counts while another open file holds
its lock, as a running ``up`` does; the kernel drops the lock when the
process ends, however it ends.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from queue_engine.foundation import localfleet

DSN = "postgresql://postgres@/postgres?host=/run/qe-sock&port=5432"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "runtime"
    folder.mkdir(mode=0o700)
    return {"QUEUE_ENGINE_RUNTIME_DIR": str(folder)}


def _write(env: dict[str, str], **fields: object) -> Path:
    """A record as a killed ``up`` leaves it: written, but nobody holds its lock."""
    path = localfleet.state_file(env)
    path.write_text(json.dumps(fields))
    return path


@contextlib.contextmanager
def _held(env: dict[str, str], **fields: object) -> Iterator[Path]:
    """A record whose lock is held (by another open file), as a running ``up`` holds it."""
    path = _write(env, **fields)
    with path.open() as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        yield path


def test_a_recorded_fleet_is_found_while_the_block_runs_and_forgotten_after(
    env: dict[str, str],
) -> None:
    assert localfleet.find(env) is None
    with localfleet.recorded(DSN, "qe", data_dir=Path("data"), environ=env) as path:
        assert oct(path.stat().st_mode & 0o777) == oct(0o600)
        fleet = localfleet.find(env)
        assert fleet is not None
        assert (fleet.pid, fleet.dsn, fleet.schema, fleet.data_dir) == (
            os.getpid(),
            DSN,
            "qe",
            "data",
        )
        assert localfleet.resolve(None, env) == (DSN, fleet)
    assert not path.exists()
    assert localfleet.find(env) is None
    assert localfleet.resolve(None, env) == ("", None)


def test_the_end_of_the_block_leaves_a_record_another_fleet_wrote(env: dict[str, str]) -> None:
    with localfleet.recorded(DSN, "qe", data_dir=None, environ=env) as path:
        path.unlink()
        path.write_text(json.dumps({"pid": 1, "dsn": "other", "schema": "qe"}))
    assert path.exists()


def test_a_record_nobody_holds_is_stale(env: dict[str, str]) -> None:
    path = _write(env, pid=os.getpid(), dsn=DSN, schema="qe")
    assert localfleet.find(env) is None
    assert path.exists()  # left for the next up to write over
    with localfleet.recorded("postgresql:///next", "qe", data_dir=None, environ=env):
        fleet = localfleet.find(env)
        assert fleet is not None and fleet.dsn == "postgresql:///next"


def test_the_record_of_a_killed_up_is_stale(env: dict[str, str]) -> None:
    script = (
        "import time; from queue_engine.foundation import localfleet\n"
        "with localfleet.recorded('postgresql:///x', 'qe', data_dir=None):\n"
        "    print('recorded', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, **env}, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"recorded\n"
        fleet = localfleet.find(env)
        assert fleet is not None and fleet.pid == holder.pid
        holder.kill()
        holder.wait()
        assert localfleet.state_file(env).exists()
        assert localfleet.find(env) is None
    finally:
        holder.kill()
        holder.wait()


def test_an_unreadable_record_is_ignored(env: dict[str, str]) -> None:
    with _held(env):
        localfleet.state_file(env).write_text("{not json")
        assert localfleet.find(env) is None


def test_a_record_in_a_folder_others_may_write_is_ignored(
    env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    with _held(env, pid=1, dsn=DSN, schema="qe"):
        assert localfleet.find(env) is not None
        Path(env["QUEUE_ENGINE_RUNTIME_DIR"]).chmod(0o777)
        assert localfleet.find(env) is None
    assert "not this user's own" in caplog.text


def test_recording_refuses_a_folder_others_may_write(env: dict[str, str]) -> None:
    Path(env["QUEUE_ENGINE_RUNTIME_DIR"]).chmod(0o777)
    with (
        pytest.raises(PermissionError, match="QUEUE_ENGINE_RUNTIME_DIR"),
        localfleet.recorded(DSN, "qe", data_dir=None, environ=env),
    ):
        pass


@pytest.mark.parametrize(
    "named",
    [
        {"QUEUE_ENGINE_DSN": "postgresql:///mine"},
        {"PGHOST": "db.example"},
        {"PGDATABASE": "app"},
        {"PGSERVICE": "prod"},
    ],
)
def test_a_dsn_or_a_libpq_variable_naming_a_server_wins_over_the_fleet(
    env: dict[str, str], named: dict[str, str]
) -> None:
    with _held(env, pid=1, dsn=DSN, schema="qe"):
        assert localfleet.resolve(None, env)[0] == DSN
        dsn, fleet = localfleet.resolve(None, {**env, **named})
        assert fleet is None
        assert dsn == named.get("QUEUE_ENGINE_DSN", "")
        assert localfleet.resolve("postgresql:///given", env) == ("postgresql:///given", None)


def test_pguser_alone_names_no_server(env: dict[str, str]) -> None:
    with _held(env, pid=1, dsn=DSN, schema="qe"):
        dsn, fleet = localfleet.resolve(None, {**env, "PGUSER": "me", "PGPASSWORD": "x"})
    assert dsn == DSN and fleet is not None


def test_the_runtime_folder_is_the_setting_then_xdg_then_temp() -> None:
    assert localfleet.runtime_dir({"QUEUE_ENGINE_RUNTIME_DIR": "/a"}) == Path("/a")
    assert localfleet.runtime_dir({"XDG_RUNTIME_DIR": "/b"}) == Path("/b/queue-engine")
    assert localfleet.runtime_dir({}).name == f"queue-engine-{os.geteuid()}"


def test_each_daemons_settings_take_the_fleet_when_given_an_empty_dsn(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their console scripts pass ``--dsn``'s default, "", when none was given."""
    from queue_engine.orchestrator.orchestrator import OrchestratorSettings
    from queue_engine.scheduler.scheduler import SchedulerSettings
    from queue_engine.web.settings import WebSettings
    from queue_engine.worker.settings import WorkerSettings

    for name in ("QUEUE_ENGINE_DSN", *localfleet.LIBPQ_TARGET_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("QUEUE_ENGINE_RUNTIME_DIR", env["QUEUE_ENGINE_RUNTIME_DIR"])
    with _held(env, pid=1, dsn=DSN, schema="queue_engine"):
        assert WebSettings.from_env(dsn="").dsn == DSN
        assert WorkerSettings.from_env(dsn="", queue="q", app="a").dsn == DSN
        assert OrchestratorSettings.from_env("", "queue_engine").dsn == DSN
        assert SchedulerSettings.from_env("", "queue_engine", None).dsn == DSN
        assert WebSettings.from_env(dsn="postgresql:///given").dsn == "postgresql:///given"
