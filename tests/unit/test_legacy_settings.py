"""The old systems' settings (``foundation/legacy_settings.py``) and their translation.

Checked without a database:

- every name the three systems' documents list is in the table, with a counterpart
  or a reason; every counterpart is a real setting (or libpq's own variable);
- the start-up notice: one line per old name set, none for an empty one, a name
  the command reads, or a name too common to be the old system's (``DEBUG``);
  it changes nothing the settings objects read;
- ``migrate-settings``' translation: values, rewritten URLs, rounded seconds,
  the pool, comments for what has no counterpart, a bad value as one line;
  the dotenv reader and the env-file writer agree;
- ``queue-ctl up`` takes dataloader's ``WORKERS_JSON``;
- ``docs/reference/configuration.md`` shows each system's table as the data has it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from queue_engine.cli import migrate_settings as ms
from queue_engine.cli.up import build_config, workers_from
from queue_engine.foundation import legacy_settings as legacy
from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import ConfigError
from queue_engine.orchestrator.orchestrator import OrchestratorSettings
from queue_engine.worker.settings import WorkerSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DOC = REPO_ROOT / "docs" / "reference" / "configuration.md"

#: Every setting the systems' own documents list, transcribed from them (the seeds).
#: dataloader: its README's "Конфигурация окружения" (AppSettings, LogSettings, PGSettings,
#: WorkerSettings), its overview's worker settings, and its working notes' "Configuration"
#: (which add DEBUG, LOCAL, PG_SCHEMA and DL_DB_DSN).
DATALOADER_NAMES = [
    "APP_HOST",
    "APP_PORT",
    "TIMEZONE",
    "DEBUG",
    "LOCAL",
    "LOG_PATH",
    "LOG_FILE_NAME",
    "LOG_ROTATION",
    "METRIC_PATH",
    "METRIC_FILE_NAME",
    "AUDIT_LOG_PATH",
    "AUDIT_LOG_FILE_NAME",
    "PG_HOST",
    "PG_PORT",
    "PG_USER",
    "PG_PASSWORD",
    "PG_DATABASE",
    "PG_SCHEMA",
    "PG_SCHEMA_QUEUE",
    "PG_USE_POOL",
    "PG_POOL_SIZE",
    "PG_MAX_OVERFLOW",
    "PG_POOL_RECYCLE",
    "PG_CONNECT_TIMEOUT",
    "PG_COMMAND_TIMEOUT",
    "DL_DB_DSN",
    "WORKERS_JSON",
    "DL_HEARTBEAT_SEC",
    "DL_DEFAULT_LEASE_TTL_SEC",
    "DL_REAPER_PERIOD_SEC",
    "DL_CLAIM_BACKOFF_SEC",
]
#: pqrun: its design document's 8.1 (environment) and 8.2 (PgJobStore/Worker keywords).
PQRUN_NAMES = [
    "WORKER_ENABLED",
    "WORKER_CONCURRENCY",
    "WORKER_REAP_INTERVAL",
    "WORKER_STALE_TIMEOUT",
]
PQRUN_HOOKS = [
    "dsn",
    "concurrency",
    "enabled",
    "idle_policy",
    "backoff",
    "loop_error_policy",
    "reap_stale_every_seconds",
    "default_stale_after",
    "worker_id",
]
#: queue_workflows: its notes ("why the ai_leads defaults", Commands): the DSN variable, the
#: AI_LEADS_* knobs and AI_LEADS_DISABLE_* test gates, and configure(...)'s keywords.
QUEUE_WORKFLOWS_NAMES = ["AI_LEADS_DB_URL", "QUEUE_WORKFLOWS_TEST_DB_URL"]
QUEUE_WORKFLOWS_FAMILIES = {"AI_LEADS_DISABLE_GPU": "AI_LEADS_DISABLE_", "AI_LEADS_X": "AI_LEADS_"}
QUEUE_WORKFLOWS_HOOKS = [
    "db_url_env",
    "container_prefix",
    "ingest_queues",
    "ingest_default_budget_s",
]


#: libpq's variables (PostgreSQL manual, "Environment Variables") that old names map to.
LIBPQ = {"PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGCONNECT_TIMEOUT"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No old name nor engine setting of the test run leaks into these checks."""
    import os

    for name in list(os.environ):
        if name.startswith(table.PREFIX) or legacy.lookup(name) is not None:
            monkeypatch.delenv(name)


# -- the table --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("system", "names", "hooks"),
    [
        (legacy.DATALOADER, DATALOADER_NAMES, []),
        (legacy.PQRUN, PQRUN_NAMES, PQRUN_HOOKS),
        (legacy.QUEUE_WORKFLOWS, QUEUE_WORKFLOWS_NAMES, QUEUE_WORKFLOWS_HOOKS),
    ],
)
def test_every_name_of_the_documents_is_mapped_or_explained(
    system: str, names: list[str], hooks: list[str]
) -> None:
    variables = {o.name for o in legacy.entries(system) if o.form == "env"}
    assert variables == set(names)
    assert {o.name for o in legacy.entries(system) if o.form == "hook"} == set(hooks)
    for old in legacy.entries(system):
        assert old.note and "\n" not in old.note, old.name
        if old.new is None or old.translate == "none":
            assert len(old.note) > 20, f"{old.name}: say why there is no counterpart"
        if old.new is not None:
            if old.new.startswith(table.PREFIX):
                table.by_env(old.new)  # KeyError: not a setting of the table
            else:
                assert old.new in LIBPQ, old.name


def test_a_family_covers_the_names_its_system_documents_by_prefix() -> None:
    for name, family in QUEUE_WORKFLOWS_FAMILIES.items():
        found = legacy.lookup(name)
        assert found is not None and found.name == family, name
    assert legacy.lookup("AI_LEADS_DB_URL").form == "env"  # type: ignore[union-attr]
    assert legacy.lookup("PGHOST") is None and legacy.lookup("QUEUE_ENGINE_DSN") is None


def test_the_lock_backoff_is_explained_not_mapped() -> None:
    # D23/D42: the claim skips a job whose lock_key is running; the job waits, spending nothing.
    old = legacy.BY_NAME["DL_CLAIM_BACKOFF_SEC"]
    assert old.new is None and old.translate == "none"
    assert "lock_key" in old.note and "no attempt" in old.note and table.POLL_S.env in old.note


# -- the notice -------------------------------------------------------------------------------


def test_one_notice_line_per_old_name_set() -> None:
    env = {
        "DL_HEARTBEAT_SEC": "5",
        "PG_HOST": "db",
        "LOG_PATH": "/var/log/dl",
        "WORKER_CONCURRENCY": "4",
        "AI_LEADS_DISABLE_GPU": "1",
        "DL_REAPER_PERIOD_SEC": "",  # empty: unset
        "DEBUG": "1",  # too common to be dataloader's
        "PGHOST": "db",  # libpq's own
        "HOME": "/root",
    }
    lines = list(legacy.notices(env))
    assert lines == [
        "AI_LEADS_DISABLE_GPU is queue_workflows' name; queue-engine does not read it: "
        "test gates of queue_workflows' own suite: nothing to carry over "
        "(queue-ctl migrate-settings --from queue_workflows)",
        "DL_HEARTBEAT_SEC is dataloader's name; queue-engine reads QUEUE_ENGINE_HEARTBEAT_S "
        "(queue-ctl migrate-settings --from dataloader)",
        f"LOG_PATH is dataloader's name; queue-engine does not read it: {legacy._LOGS} "
        "(queue-ctl migrate-settings --from dataloader)",
        "PG_HOST is dataloader's name; queue-engine reads PGHOST "
        "(queue-ctl migrate-settings --from dataloader)",
        "WORKER_CONCURRENCY is pqrun's name; queue-engine does not read it: "
        f"{legacy.BY_NAME['WORKER_CONCURRENCY'].note} (queue-ctl migrate-settings --from pqrun)",
    ]
    read = list(legacy.notices(env, reads={"DL_HEARTBEAT_SEC", "PG_HOST"}))
    assert read == [lines[0], lines[2], lines[4]]


def test_old_names_change_nothing_the_daemons_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # Noticed, never honoured: dataloader's heartbeat, reaper and lease are not aliases.
    before = (WorkerSettings.from_env(queue="q", app="a"), OrchestratorSettings.from_env("", "s"))
    for name, value in {
        "DL_HEARTBEAT_SEC": "3",
        "DL_DEFAULT_LEASE_TTL_SEC": "30",
        "DL_REAPER_PERIOD_SEC": "2",
        "WORKER_REAP_INTERVAL": "7",
        "WORKER_STALE_TIMEOUT": "99",
    }.items():
        monkeypatch.setenv(name, value)
    after = (WorkerSettings.from_env(queue="q", app="a"), OrchestratorSettings.from_env("", "s"))
    assert after == before


def test_the_notice_can_be_turned_off(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from queue_engine.cli.common import legacy_notices

    monkeypatch.setenv("DL_HEARTBEAT_SEC", "5")
    legacy_notices("queue-claim-worker")
    assert capsys.readouterr().err.startswith("queue-claim-worker: notice: DL_HEARTBEAT_SEC is ")
    legacy_notices("queue-ctl", frozenset({"DL_HEARTBEAT_SEC"}))
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(table.LEGACY_NOTICE.env, "off")
    legacy_notices("queue-claim-worker")
    assert capsys.readouterr().err == ""


# -- migrate-settings' translation ---------------------------------------------------------------


def _translated(system: str, env: dict[str, str], **more: str) -> ms.Output:
    return ms.translate(system, env, **more)


def test_dataloader_values_become_queue_engine_settings() -> None:
    out = _translated(
        legacy.DATALOADER,
        {
            "APP_PORT": "8081",
            "DL_HEARTBEAT_SEC": "5",
            "DL_DEFAULT_LEASE_TTL_SEC": "90.5",
            "DL_REAPER_PERIOD_SEC": "10",
            "PG_HOST": "db.internal",
            "PG_PASSWORD": "s3cret",
            "PG_CONNECT_TIMEOUT": "2.5",
            "PG_SCHEMA_QUEUE": "queue",
            "PG_SCHEMA": "app",
            "PG_POOL_SIZE": "5",
            "PG_MAX_OVERFLOW": "10",
            "DEBUG": "True",
            "LOG_PATH": "/var/log",
        },
    )
    assert out.values == {
        "QUEUE_ENGINE_WEB_PORT": "8081",
        "QUEUE_ENGINE_LOG_LEVEL": "DEBUG",
        "PGHOST": "db.internal",
        "PGPASSWORD": "s3cret",
        "QUEUE_ENGINE_SCHEMA": "queue",
        "QUEUE_ENGINE_WEB_POOL_SIZE": "15",
        "PGCONNECT_TIMEOUT": "3",
        "QUEUE_ENGINE_HEARTBEAT_S": "5",
        "QUEUE_ENGINE_LEASE_TTL_S": "91",
        "QUEUE_ENGINE_SWEEP_S": "10",
    }
    text = "\n".join(out.lines)
    assert "# 90.5 rounded up" not in text  # the comment names the old variable first
    assert "DL_DEFAULT_LEASE_TTL_SEC -> QUEUE_ENGINE_LEASE_TTL_S: 90.5 rounded up to 91" in text
    assert "# PG_SCHEMA: not used, QUEUE_ENGINE_SCHEMA is set above" in text
    assert "# LOG_PATH: no counterpart: the daemons log to stderr" in text
    assert "5 + 10 overflow = 15" in text
    assert "# APP_HOST unset: dataloader's default was 0.0.0.0" in text
    assert "s3cret" not in text.replace("PGPASSWORD=s3cret", "")  # in its line only


def test_a_sqlalchemy_url_becomes_a_libpq_uri_and_the_pg_names_step_aside() -> None:
    out = _translated(
        legacy.DATALOADER,
        {
            "DL_DB_DSN": "postgresql+asyncpg://app:p%40ss@db:5432/queue?ssl=true&command_timeout=5",
            "PG_HOST": "maindb",
            "PG_CONNECT_TIMEOUT": "5",
        },
    )
    assert out.values == {
        "QUEUE_ENGINE_DSN": "postgresql://app:p%40ss@db:5432/queue?sslmode=require",
        "PGCONNECT_TIMEOUT": "5",  # not a main-database name: it still applies
    }
    text = "\n".join(out.lines)
    assert "the driver suffix +asyncpg was removed" in text
    assert "the parameter command_timeout= was left out" in text
    assert "# PG_HOST: not carried over: DL_DB_DSN names the queue's database" in text
    assert "QUEUE_ENGINE_DSN='postgresql://app:p%40ss@db:5432/queue?sslmode=require'" in out.lines


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DL_HEARTBEAT_SEC": "0.01"}, "DL_HEARTBEAT_SEC='0.01' cannot become "),
        ({"APP_PORT": "http"}, "APP_PORT='http' cannot become QUEUE_ENGINE_WEB_PORT"),
        ({"PG_SCHEMA_QUEUE": "Queue"}, "PG_SCHEMA_QUEUE='Queue' cannot become"),
        ({"DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        ({"PG_PORT": "pg"}, "PG_PORT='pg' cannot become PGPORT"),
        ({"DL_DB_DSN": "mysql://u:hunter2@h/db"}, "DL_DB_DSN is not a PostgreSQL URL"),
        ({"DL_DB_DSN": "postgresql://u:hunter2@h:port/db"}, "DL_DB_DSN is not a database URL"),
        ({"DL_DB_DSN": "postgresql://u:hunter2%zz@h/db"}, "DL_DB_DSN is not a database URL"),
        ({"WORKERS_JSON": "[{"}, "WORKERS_JSON is not valid JSON"),
        ({"PG_POOL_SIZE": "150", "PG_MAX_OVERFLOW": "100"}, "must be between 1 and 200"),
    ],
)
def test_a_bad_value_is_one_line_and_never_shows_a_password(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _translated(legacy.DATALOADER, env)
    text = str(info.value)
    assert message in text and "\n" not in text and "hunter2" not in text


def test_pqrun_maps_what_maps_and_explains_the_rest() -> None:
    out = _translated(
        legacy.PQRUN,
        {"WORKER_ENABLED": "true", "WORKER_CONCURRENCY": "3", "WORKER_STALE_TIMEOUT": "1800"},
    )
    assert out.values == {"QUEUE_ENGINE_DEFAULT_TIMEOUT_S": "1800"}
    text = "\n".join(out.lines)
    assert "# WORKER_ENABLED: no counterpart: workers are processes" in text
    assert "systemctl enable --now queue-claim-worker@QUEUE:{1..3}.service" in text
    assert (
        "# WORKER_REAP_INTERVAL unset: pqrun's default was 60, QUEUE_ENGINE_SWEEP_S's is 5" in text
    )
    assert "#   worker_id: Worker(worker_id=...)" in text


def test_queue_workflows_reads_the_dsn_variable_configure_named() -> None:
    env = {"LM_FLOOD_DB_URL": "postgresql://lm@db/lm", "AI_LEADS_DISABLE_GPU": "1"}
    out = _translated(legacy.QUEUE_WORKFLOWS, env, db_url_env="LM_FLOOD_DB_URL")
    assert out.values == {"QUEUE_ENGINE_DSN": "postgresql://lm@db/lm"}
    text = "\n".join(out.lines)
    assert "LM_FLOOD_DB_URL (AI_LEADS_DB_URL by configure(db_url_env=...))" in text
    assert "# AI_LEADS_DISABLE_GPU: no counterpart: test gates" in text
    assert "#   container_prefix: configure(container_prefix=...)" in text
    both = {**env, "AI_LEADS_DB_URL": "postgresql://ai@db/ai"}
    out = _translated(legacy.QUEUE_WORKFLOWS, both, db_url_env="LM_FLOOD_DB_URL")
    assert out.values == {"QUEUE_ENGINE_DSN": "postgresql://lm@db/lm"}
    assert "# AI_LEADS_DB_URL: not used, --db-url-env names LM_FLOOD_DB_URL" in out.lines


def test_workers_json_is_shown_as_processes() -> None:
    raw = '[{"queue": "load.cbr", "concurrency": 2}, {"queue": "load.sgx"}]'
    out = _translated(legacy.DATALOADER, {"WORKERS_JSON": raw})
    assert out.values == {}
    text = "\n".join(out.lines)
    assert "queue-ctl up --queue load.cbr=2 --queue load.sgx=1" in text
    assert (
        "systemctl enable --now queue-claim-worker@load.cbr:{1..2}.service "
        "queue-claim-worker@load.sgx:1.service"
    ) in text
    assert 'command ["--queue=load.cbr"] and deploy.replicas: 2' in text
    none = _translated(legacy.DATALOADER, {"WORKERS_JSON": '[{"queue": "q", "concurrency": 0}]'})
    assert "# WORKERS_JSON: every concurrency is 0: no workers to run" in none.lines


# -- the env file: read as dotenv does, written so that every reader agrees -----------------------


def test_an_env_file_is_read_as_dotenv_reads_it(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text(
        "# dataloader\n\nexport APP_PORT=8081\nPG_HOST = db # the main one\n"
        'PG_PASSWORD=\'a b#c\'\nWORKERS_JSON="[{\\"queue\\": \\"q\\"}]"\nEMPTY=\n'
    )
    assert ms.read_env_file(path) == {
        "APP_PORT": "8081",
        "PG_HOST": "db",
        "PG_PASSWORD": "a b#c",
        "WORKERS_JSON": '[{"queue": "q"}]',
        "EMPTY": "",
    }
    for bad, line in [("PG_PASSWORD=hunter2\nnot a line\n", 2), ("A='open\n", 1)]:
        path.write_text(bad)
        with pytest.raises(ConfigError) as info:
            ms.read_env_file(path)
        assert str(info.value).startswith(f"{path}:{line}: ") and "hunter2" not in str(info.value)


@pytest.mark.parametrize("value", ["plain", "a b", "p%40ss@h/db?sslmode=require&x=1", ""])
def test_a_written_line_reads_back_as_its_value(tmp_path: Path, value: str) -> None:
    path = tmp_path / "out.env"
    path.write_text(ms.env_line("X", value) + "\n")
    assert ms.read_env_file(path) == {"X": value}


def test_a_value_no_env_file_can_hold_is_refused() -> None:
    with pytest.raises(ConfigError, match="X: its value holds a quote"):
        ms.env_line("X", "it's")


# -- WORKERS_JSON in queue-ctl up --------------------------------------------------------------


def test_workers_json_gives_the_fleets_workers_per_queue() -> None:
    raw = '[{"queue": "load.cbr", "concurrency": 2}, {"queue": "a"}, {"queue": "a", "concurrency": 2}, {"queue": "off", "concurrency": 0}]'
    assert legacy.parse_workers_json(raw) == {"load.cbr": 2, "a": 3}
    data = {"app": "m", "queues": {"load.cbr": 1, "email": 1}}
    workers = legacy.parse_workers_json(raw)
    config = build_config(data, None, ["a=1"], workers=workers)
    assert config.queues == {
        "load.cbr": 2,
        "email": 1,
        "a": 1,
    }  # the list over the file, flags last


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{", "is not valid JSON"),
        ('{"queue": "q"}', "must be a JSON list"),
        ("[1]", "entry 1 must be an object"),
        ('[{"queue": "q", "concurency": 2}]', "unknown key 'concurency'"),
        ('[{"concurrency": 2}]', "'queue' must be a queue name"),
        ('[{"queue": "q", "concurrency": -1}]', "whole number >= 0"),
        ('[{"queue": "q", "concurrency": true}]', "whole number >= 0"),
    ],
)
def test_a_bad_workers_json_is_one_line(raw: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        legacy.parse_workers_json(raw, "--workers-json")
    assert str(info.value).startswith("--workers-json") and message in str(info.value)
    with pytest.raises(
        ConfigError, match=r"^--workers-json: workers of queue 'q' must be .* 1 to 64"
    ):
        build_config({"app": "m"}, None, [], workers={"q": 65}, workers_where="--workers-json")


def test_the_flag_wins_over_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"WORKERS_JSON": '[{"queue": "env", "concurrency": 2}]'}
    assert workers_from(None, env) == ({"env": 2}, "WORKERS_JSON")
    assert workers_from('[{"queue": "flag"}]', env) == ({"flag": 1}, "--workers-json")
    assert workers_from(None, {}) == (None, "WORKERS_JSON")
    said = capsys.readouterr().out.splitlines()
    assert said == [
        "up | workers from WORKERS_JSON (dataloader's list): env=2",
        "up | workers from --workers-json (dataloader's list): flag=1",
    ]


# -- the reference page ----------------------------------------------------------------------


@pytest.mark.parametrize("system", legacy.SYSTEMS)
def test_the_configuration_page_shows_each_systems_table(system: str) -> None:
    # The page's table is this function's output, pasted: print it to update the page.
    hint = f"python -c 'from {legacy.__name__} import markdown_table; print(markdown_table({system!r}))'"
    assert legacy.markdown_table(system) in CONFIG_DOC.read_text(), hint
