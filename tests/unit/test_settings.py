"""The settings table (``queue_engine.settings``) is the one source of every setting.

Checked here, without a database:

- the table itself is well formed, and a setting parses and bounds its value
  with a one-line ConfigError naming the variable;
- the settings objects (worker, orchestrator, scheduler, retention) and the
  click options take their defaults from it, and the modules' default
  constants agree with it;
- the disagreements the table was built to end stay ended: one
  ``RECONNECT_MAX_S`` default and one heartbeat minimum for the three daemons,
  ``DEAD_AFTER_S`` following the heartbeat in the views as in the
  orchestrator, ``PREFETCH`` honoured by ``WorkerSettings.from_env``;
- ``docs/reference/configuration.md`` lists exactly the table's variables,
  with the table's defaults, readers and options.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.ctl import console_commands, walk_commands

from queue_engine import settings as table
from queue_engine import stats
from queue_engine.errors import ConfigError
from queue_engine.orchestrator import orchestrator as orchestrator_module
from queue_engine.orchestrator.orchestrator import OrchestratorConfig
from queue_engine.orchestrator.pruner import Retention
from queue_engine.scheduler import scheduler as scheduler_module
from queue_engine.scheduler.scheduler import SchedulerConfig
from queue_engine.worker import settings as worker_settings
from queue_engine.worker.settings import WorkerSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DOC = REPO_ROOT / "docs" / "reference" / "configuration.md"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``QUEUE_ENGINE_*`` variable of the test run leaks into these checks."""
    import os

    for name in list(os.environ):
        if name.startswith(table.PREFIX) and name != "QUEUE_ENGINE_TEST_DSN":
            monkeypatch.delenv(name)


def _worker(**overrides: object) -> WorkerSettings:
    return WorkerSettings.from_env(queue="q", app="app", **overrides)


def _orchestrator() -> OrchestratorConfig:
    return OrchestratorConfig.from_env("", "queue_engine")


def _scheduler() -> SchedulerConfig:
    return SchedulerConfig.from_env("", "queue_engine")


# -- the table --------------------------------------------------------------------------


def test_the_table_is_well_formed() -> None:
    options = [s.option for s in table.SETTINGS.values() if s.option is not None]
    assert len(options) == len(set(options))
    for name, setting in table.SETTINGS.items():
        assert name == setting.name and re.fullmatch(r"[A-Z][A-Z0-9_]*", name), name
        assert setting.read_by and set(setting.read_by) <= set(table.PROCESSES), name
        assert setting.doc and "\n" not in setting.doc, name
        assert setting.check(setting.default) == setting.default, name
        assert setting.option is None or setting.option.startswith("--"), name


def test_a_setting_reads_parses_and_bounds_its_variable() -> None:
    env = table.HEARTBEAT_S.env
    assert table.HEARTBEAT_S.read({}) == 10.0
    assert table.HEARTBEAT_S.read({env: ""}) == 10.0  # empty counts as unset
    assert table.HEARTBEAT_S.read({env: "2.5"}) == 2.5
    for raw, message in [
        ("soon", "is not a number"),
        ("inf", "is not a finite number"),
        ("nan", "is not a finite number"),
        ("0.01", "must be at least 0.05"),
    ]:
        with pytest.raises(ConfigError) as info:
            table.HEARTBEAT_S.read({env: raw})
        assert str(info.value) == f"{env}={raw!r} {message}"


def test_whole_numbers_choices_lengths_and_an_off_zero() -> None:
    lease = table.LEASE_TTL_S
    assert lease.read({lease.env: "30"}) == 30 and lease.read({lease.env: "30.0"}) == 30
    with pytest.raises(ConfigError, match="whole number"):
        lease.read({lease.env: "1.5"})
    with pytest.raises(ConfigError, match="between 1 and 86400"):
        lease.read({lease.env: "86401"})
    commit = table.WORKER_SYNCHRONOUS_COMMIT
    assert commit.read({commit.env: " ON "}) == "on"
    with pytest.raises(ConfigError, match="use one of on, off"):
        commit.read({commit.env: "maybe"})
    assert table.LOG_LEVEL.read({table.LOG_LEVEL.env: "debug"}) == "DEBUG"
    with pytest.raises(ConfigError, match=r"QUEUE_ENGINE_WARM_KEY \(--warm-key\) must be 1 to 255"):
        table.WARM_KEY.check("k" * 256)
    recovery = table.RECOVERY_S
    assert recovery.read({recovery.env: "0"}) == 0.0
    with pytest.raises(ConfigError, match=r"at least 0.05 \(or 0 to turn it off\)"):
        recovery.read({recovery.env: "0.01"})
    with pytest.raises(ConfigError, match=r"QUEUE_ENGINE_PREFETCH \(--prefetch\)"):
        table.PREFETCH.check(True)  # a bool is not a count


# -- one default, one minimum, one rule (each failed before the table) -----------------------


def test_reconnect_max_has_one_default_for_every_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: 10 s in the orchestrator, 5 s in the scheduler, and the worker had no setting.
    default = table.RECONNECT_MAX_S.default
    assert _orchestrator().reconnect_max_s == default
    assert _scheduler().reconnect_max_s == default
    assert _worker().reconnect_max_s == default
    assert SchedulerConfig(dsn="", schema="queue_engine").reconnect_max_s == default
    monkeypatch.setenv("QUEUE_ENGINE_RECONNECT_MAX_S", "3")
    assert {
        _orchestrator().reconnect_max_s,
        _scheduler().reconnect_max_s,
        _worker().reconnect_max_s,
    } == {3.0}


@pytest.mark.parametrize("value", ["0.02", "0.04"])
def test_the_heartbeat_minimum_is_the_same_for_every_daemon(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # Before: the worker took 0.02 s, the orchestrator and the scheduler refused it.
    monkeypatch.setenv("QUEUE_ENGINE_HEARTBEAT_S", value)
    for build in (_worker, _orchestrator, _scheduler):
        with pytest.raises(ConfigError, match="QUEUE_ENGINE_HEARTBEAT_S"):
            build()
    monkeypatch.setenv("QUEUE_ENGINE_HEARTBEAT_S", "0.05")
    assert {_worker().heartbeat_s, _orchestrator().heartbeat_s, _scheduler().heartbeat_s} == {0.05}


def test_dead_after_follows_the_heartbeat_in_the_views_as_in_the_orchestrator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: stats used a fixed 30 s, the orchestrator three heartbeats.
    assert stats.dead_after_s() == _orchestrator().dead_after == 30.0
    monkeypatch.setenv("QUEUE_ENGINE_HEARTBEAT_S", "2")
    assert stats.dead_after_s() == _orchestrator().dead_after == 6.0
    monkeypatch.setenv("QUEUE_ENGINE_DEAD_AFTER_S", "45")
    assert stats.dead_after_s() == _orchestrator().dead_after == 45.0


def test_the_worker_settings_honour_prefetch_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: only the click option read QUEUE_ENGINE_PREFETCH.
    monkeypatch.setenv("QUEUE_ENGINE_PREFETCH", "4")
    assert _worker().prefetch == 4
    assert _worker(prefetch=2).prefetch == 2  # an option still wins
    monkeypatch.setenv("QUEUE_ENGINE_PREFETCH", "0")
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_PREFETCH='0' must be between 1 and 1000"):
        _worker()


# -- the table drives the settings objects -----------------------------------------------


def test_settings_objects_default_to_the_table() -> None:
    worker = _worker()
    for field, setting in worker_settings.ENV_FIELDS.items():
        if field not in ("queue", "app"):
            assert getattr(worker, field) == setting.default, field
            assert getattr(WorkerSettings(queue="q", app="a"), field) == setting.default, field
    orch = _orchestrator()
    direct_orch = OrchestratorConfig(dsn="", schema="queue_engine")
    for field, setting in orchestrator_module.ENV_FIELDS.items():
        assert getattr(orch, field) == getattr(direct_orch, field) == setting.default, field
    sched = _scheduler()
    direct_sched = SchedulerConfig(dsn="", schema="queue_engine")
    for field, setting in scheduler_module.ENV_FIELDS.items():
        assert getattr(sched, field) == getattr(direct_sched, field) == setting.default, field
    assert Retention.from_env() == Retention()
    assert Retention().succeeded_s == table.RETAIN_SUCCEEDED_S.default


@pytest.mark.parametrize(
    ("fields", "process"),
    [
        (worker_settings.ENV_FIELDS, table.WORKER),
        (orchestrator_module.ENV_FIELDS, table.ORCHESTRATOR),
        (scheduler_module.ENV_FIELDS, table.SCHEDULER),
    ],
)
def test_the_table_names_every_process_that_reads_a_setting(
    fields: dict[str, table.Setting[Any]], process: str
) -> None:
    for field, setting in fields.items():
        assert process in setting.read_by, f"{setting.env} ({field}) is read by {process}"


def test_module_default_constants_agree_with_the_table() -> None:
    from queue_engine import logs
    from queue_engine.daemon import heartbeat, runtime
    from queue_engine.orchestrator import dead_workers, fast_recovery, leader, reaper
    from queue_engine.scheduler import ticker
    from queue_engine.worker import watchdog

    assert table.DEFAULT_TIMEOUT_S.default == watchdog.DEFAULT_TIMEOUT_S
    assert table.SHUTDOWN_GRACE_S.default == watchdog.SHUTDOWN_GRACE_DEFAULT_S
    assert table.CANCEL_GRACE_S.default == watchdog.CANCEL_GRACE_DEFAULT_S
    assert table.ZOMBIE_GRACE_S.default == watchdog.ZOMBIE_GRACE_DEFAULT_S
    assert table.HEARTBEAT_S.default == heartbeat.HEARTBEAT_DEFAULT_S
    assert table.CONNECT_RETRY_S.default == runtime.CONNECT_RETRY_DEFAULT_S
    assert table.ELECT_S.default == leader.ELECT_INTERVAL_DEFAULT_S
    assert table.RECONNECT_MAX_S.default == leader.RECONNECT_BACKOFF_MAX_S
    assert table.RECONNECT_MAX_S.default == ticker.RECONNECT_MAX_DEFAULT_S
    assert table.SWEEP_S.default == reaper.SWEEP_DEFAULT_S
    assert table.RECOVERY_S.default == fast_recovery.RECOVERY_DEFAULT_S
    assert dead_workers.DEAD_AFTER_BEATS == table.DEAD_AFTER_BEATS
    assert table.dead_after_s({}) == dead_workers.DEAD_AFTER_DEFAULT_S
    assert tuple(logs.LOG_FORMATS) == table.LOG_FORMAT.choices


# -- the table drives the command lines ---------------------------------------------------------


def _same(shown: str, expected: str) -> bool:
    """``1.0``, ``default 1`` and ``1: what it means`` show the default 1; words must match."""
    shown = re.split(r"[;:]", shown.removeprefix("default "))[0].strip()
    try:
        return float(shown) == float(expected)
    except ValueError:
        return shown == expected


def test_click_options_take_their_variable_and_default_from_the_table() -> None:
    used: set[str] = set()
    for prog, root in console_commands().items():
        for path, command in walk_commands(root, prog):
            for param in command.params:
                envvar = getattr(param, "envvar", None)
                if not envvar:
                    continue
                assert isinstance(envvar, str), f"{path} {param.name}"
                setting = table.by_env(envvar)  # KeyError: a variable the table lacks
                assert param.opts[0] == setting.option, f"{path}: {envvar}"
                default = param.default
                if type(default).__name__ == "Sentinel":  # click >= 8.3: no default given
                    default = None
                assert default == setting.default, f"{path} {setting.option}"
                used.add(setting.name)
            for setting, default in re.findall(
                r"(QUEUE_ENGINE_[A-Z_]+) \(([^)]*)\)", command.help or ""
            ):
                shown = table.by_env(setting).shown_default.strip("`")
                assert _same(default, shown), f"{path} help: {setting} ({default}), table: {shown}"
    with_option = {s.name for s in table.SETTINGS.values() if s.option is not None}
    assert used == with_option


# -- the table drives the reference page ------------------------------------------------------


def _doc_rows() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in CONFIG_DOC.read_text().splitlines():
        match = re.match(r"^\| `(QUEUE_ENGINE_[A-Z0-9_]+)` \|", line)
        if match is None:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert match.group(1) not in rows, f"{match.group(1)} has two rows in {CONFIG_DOC.name}"
        rows[match.group(1)] = cells
    return rows


def test_the_configuration_page_lists_exactly_the_tables_settings() -> None:
    rows = _doc_rows()
    assert set(rows) == {s.env for s in table.SETTINGS.values()}


@pytest.mark.parametrize("setting", list(table.SETTINGS.values()), ids=lambda s: s.name)
def test_the_configuration_page_shows_each_default_reader_and_option(
    setting: table.Setting[Any],
) -> None:
    cells = _doc_rows()[setting.env]
    assert len(cells) == 4, cells
    default, read_by = cells[1], cells[2]
    shown = setting.shown_default
    assert default == shown or default.startswith(shown + " ("), f"{default!r} vs {shown!r}"
    named = {
        p for p in table.PROCESSES if re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", read_by)
    }
    assert named == set(setting.read_by), read_by
    if setting.option is not None:
        assert f"`{setting.option}`" in read_by


#: Where a variable may be named: the package, its tests, benches, docs and deployment files.
_NAMED_IN = ("queue_engine", "tests", "bench", "docs", "systemd", "README.md", "docker-compose.yml")


def _files_naming_variables() -> Iterator[Path]:
    for entry in _NAMED_IN:
        path = REPO_ROOT / entry
        if path.is_file():
            yield path
        elif path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and file.suffix in {".py", ".md", ".service", ".env", ".yml"}:
                    yield file


def test_every_variable_named_anywhere_is_in_the_table() -> None:
    # A name ending in "_" is a family (QUEUE_ENGINE_RETAIN_<STATUS>_S), not a variable.
    known = {s.env for s in table.SETTINGS.values()}
    unknown = {
        f"{name} ({path.relative_to(REPO_ROOT)})"
        for path in _files_naming_variables()
        for name in re.findall(r"QUEUE_ENGINE_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())
        if name not in known
    }
    assert not unknown


#: A cell that names one variable, alone or after its option (`` `--dsn` / `QUEUE_ENGINE_DSN` ``).
_VARIABLE_CELL = re.compile(r"(?:`--[\w-]+[^`]*` / )?`(QUEUE_ENGINE_[A-Z0-9_]+)`")


def _table_rows(path: Path) -> Iterator[tuple[list[str], list[str]]]:
    """Each row of each Markdown table in ``path``, with the header of its table."""
    header: list[str] | None = None
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = [c.lower() for c in cells]
        elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
            yield header, cells


def _stated_value(cell: str) -> str | None:
    """The value a default cell states (a number or a `literal` first), or None (unset, none)."""
    match = re.match(r"`([^`]+)`|(-?\d[\d,]*(?:\.\d+)?)(?![\w.])", cell)
    if match is None:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2).replace(",", "")


def _shows_default(cell: str, setting: table.Setting[Any]) -> bool:
    """Whether a docs table's default cell says what the table says, however it is worded.

    ``1.0`` shows the default 1, ``604800 (7 days)`` shows 604800, and any wording with no
    value (``unset``, ``—``, ``(required)``, ``libpq `PG*` variables``) shows "no default";
    a default in words (three heartbeats) must be quoted as the table has it.
    """
    shown = setting.shown_default
    cell = cell[1:-1] if re.fullmatch(r"\([^()]*\)", cell) else cell  # "(required)"
    if cell == shown or cell.startswith(shown + " ("):
        return True
    value, default = _stated_value(cell), setting.default
    if setting.default_text is not None:
        return False
    if default is None or default == "":
        return value is None
    if isinstance(default, str):
        return value == default
    try:
        return value is not None and float(value) == float(default)
    except ValueError:
        return False


def test_every_doc_table_row_of_a_variable_shows_the_tables_default() -> None:
    # Every row of a table with a "default" column, wherever the variable's cell is (the
    # first column, or after an option or a dash, as in the worker guide: a row starting
    # `| — |` once gave QUEUE_POLL_RATE the default 5 while the table said 2).
    wrong = []
    checked = 0
    for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]:
        for header, cells in _table_rows(path):
            if "default" not in header or len(cells) != len(header):
                continue
            column = header.index("default")
            for cell in cells[:column]:
                match = _VARIABLE_CELL.fullmatch(cell)
                if match is None:
                    continue
                checked += 1
                if not _shows_default(cells[column], table.by_env(match.group(1))):
                    name = f"{path.relative_to(REPO_ROOT)}: {match.group(1)}"
                    wrong.append(f"{name} {cells[column]!r}")
    assert checked > len(table.SETTINGS), checked  # the configuration page alone has them all
    assert not wrong, f"the table says otherwise: {wrong}"


def test_a_default_cell_is_read_as_the_docs_word_it() -> None:
    poll_rate, schema = table.QUEUE_POLL_RATE, table.SCHEMA
    assert _shows_default("2", poll_rate) and _shows_default("2.0 (per queue)", poll_rate)
    assert not _shows_default("5", poll_rate) and not _shows_default("unset", poll_rate)
    assert _shows_default("`queue_engine`", schema) and not _shows_default("`public`", schema)
    for no_value in ("unset", "—", "(required)", "libpq `PG*` variables"):
        assert _shows_default(no_value, table.DSN), no_value
    assert not _shows_default("`postgresql:///app`", table.DSN)
    assert _shows_default("604800 (7 days)", table.RETAIN_SUCCEEDED_S)
    assert _shows_default(table.DEAD_AFTER_S.shown_default + " (30)", table.DEAD_AFTER_S)
    assert not _shows_default("30", table.DEAD_AFTER_S)
    assert _shows_default("(required)", table.QUEUE) and _shows_default("required", table.QUEUE)
