"""``queue-ctl migrate-settings`` and the start-up notice, as an operator meets them.

Each test runs the real console scripts as subprocesses (no database needed):
the printed environment is a valid env file, and given back to the daemons'
settings loaders it yields the values intended; a bad value is one line and
exit 2 with nothing on stdout; and a daemon that finds an old name says so in
one line per name, and otherwise does what it did without it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.ctl import BIN, clean_env, queue_ctl

from queue_engine.cli.migrate_settings import read_env_file
from queue_engine.orchestrator.orchestrator import OrchestratorSettings
from queue_engine.web.settings import WebSettings
from queue_engine.worker.settings import WorkerSettings

DATALOADER_ENV = """\
# dataloader's .env
APP_HOST=0.0.0.0
APP_PORT=8081
PG_HOST=maindb
PG_PASSWORD='main pass'
PG_SCHEMA_QUEUE=dlqueue
PG_POOL_SIZE=5
PG_MAX_OVERFLOW=3
DL_DB_DSN=postgresql+asyncpg://etl:s3cr%40t@queuedb:5433/etl?ssl=require
WORKERS_JSON='[{"queue": "load.cbr", "concurrency": 2}]'
DL_HEARTBEAT_SEC=5
DL_DEFAULT_LEASE_TTL_SEC=45
DL_REAPER_PERIOD_SEC=10
DL_CLAIM_BACKOFF_SEC=15
LOG_PATH=/var/log/dataloader
"""


def test_the_printed_environment_round_trips_into_the_daemons_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = tmp_path / ".env"
    old.write_text(DATALOADER_ENV)
    # The environment wins over the file, as in pydantic-settings.
    done = queue_ctl(
        "migrate-settings", "--from", "dataloader", "--env-file", str(old),
        env={"DL_HEARTBEAT_SEC": "4"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # migrate-settings reads old names: it does not notice them
    new = tmp_path / "queue-engine.env"
    new.write_text(done.stdout)
    for line in done.stdout.splitlines():
        assert line.startswith("# ") or "=" in line, line  # an env file: comments and NAME=value
    values = read_env_file(new)
    assert values == {
        "QUEUE_ENGINE_WEB_HOST": "0.0.0.0",
        "QUEUE_ENGINE_WEB_PORT": "8081",
        "QUEUE_ENGINE_SCHEMA": "dlqueue",
        "QUEUE_ENGINE_WEB_POOL_SIZE": "8",
        "QUEUE_ENGINE_DSN": "postgresql://etl:s3cr%40t@queuedb:5433/etl?sslmode=require",
        "QUEUE_ENGINE_HEARTBEAT_S": "4",
        "QUEUE_ENGINE_LEASE_TTL_S": "45",
        "QUEUE_ENGINE_SWEEP_S": "10",
    }
    assert "# PG_HOST: not carried over" in done.stdout  # DL_DB_DSN names the queue's database
    assert "queue-claim-worker@load.cbr:{1..2}.service" in done.stdout
    assert "# DL_CLAIM_BACKOFF_SEC: no counterpart: not needed" in done.stdout

    for name in list(clean_env()):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    worker = WorkerSettings.from_env(queue="load.cbr", app="app")
    assert (worker.dsn, worker.schema) == (values["QUEUE_ENGINE_DSN"], "dlqueue")
    assert (worker.heartbeat_s, worker.lease_ttl_s) == (4.0, 45)
    assert OrchestratorSettings.from_env(worker.dsn, worker.schema).sweep_s == 10.0
    web = WebSettings.from_env()
    assert (web.host, web.port, web.pool_size) == ("0.0.0.0", 8081, 8)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DL_HEARTBEAT_SEC": "0.01"}, "DL_HEARTBEAT_SEC='0.01' cannot become"),
        ({"DL_DB_DSN": "mysql://etl:hunter2@db/etl"}, "DL_DB_DSN is not a PostgreSQL URL"),
        ({"WORKERS_JSON": "[{"}, "WORKERS_JSON is not valid JSON"),
    ],
)
def test_a_bad_value_is_one_line_exit_2_and_no_output(env: dict[str, str], message: str) -> None:
    done = queue_ctl("migrate-settings", "--from", "dataloader", env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith(f"queue-ctl: error: {message}")
    assert len(done.stderr.splitlines()) == 1 and "hunter2" not in done.stderr


def test_the_help_says_the_output_holds_secrets() -> None:
    done = queue_ctl("migrate-settings", "--help")
    assert done.returncode == 0
    assert "holds secrets" in done.stdout and "Nothing is logged" in done.stdout


OLD = {"DL_HEARTBEAT_SEC": "3", "WORKER_STALE_TIMEOUT": "99", "DEBUG": "1"}


def _run(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(env),
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("queue-claim-worker", "--help"),
        ("queue-orchestrator", "--help"),
        ("queue-scheduler", "--help"),
        ("queue-web", "--help"),
        ("queue-ctl", "--dsn", "postgresql://nobody@db.invalid/x", "dsn"),
    ],
)
def test_a_command_notices_each_old_name_once_and_behaves_as_without(
    argv: tuple[str, ...],
) -> None:
    plain = _run(*argv, env={})
    noticed = _run(*argv, env=OLD)
    prog = argv[0]
    assert noticed.stderr.splitlines() == [
        f"{prog}: notice: DL_HEARTBEAT_SEC is dataloader's name; queue-engine reads "
        "QUEUE_ENGINE_HEARTBEAT_S (queue-ctl migrate-settings --from dataloader)",
        f"{prog}: notice: WORKER_STALE_TIMEOUT is pqrun's name; queue-engine reads "
        "QUEUE_ENGINE_DEFAULT_TIMEOUT_S (queue-ctl migrate-settings --from pqrun)",
    ]  # DEBUG: too common a name to be dataloader's
    assert (noticed.returncode, noticed.stdout) == (plain.returncode, plain.stdout)
    assert plain.stderr == ""
    quiet = _run(*argv, env={**OLD, "QUEUE_ENGINE_LEGACY_NOTICE": "off"})
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (plain.returncode, plain.stdout, "")
