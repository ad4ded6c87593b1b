"""The settings table (``queue_engine.foundation.settings``) is the one source of every setting.

Checked here, without a database:

- the table itself is well formed, and a setting parses and bounds its value
  with a one-line ConfigError naming the variable;
- the settings objects (worker, orchestrator, scheduler, retention) and the
  click options take their defaults from it, and no module keeps a literal
  copy of a default (``SWEEP_DEFAULT_S = 5.0``): a module's default constant
  reads the table;
- the disagreements the table was built to end stay ended: one
  ``RECONNECT_MAX_S`` default and one heartbeat minimum for the three daemons,
  ``DEAD_AFTER_S`` following the heartbeat in the views as in the
  orchestrator, ``PREFETCH`` honoured by ``WorkerSettings.from_env``;
- the help of an option that is a setting is the setting's doc;
- one duration grammar: every command-line option that takes a duration reads
  it as the settings do (``2w`` is two weeks everywhere);
- ``docs/reference/configuration.md`` lists exactly the table's variables,
  with the table's defaults, readers and options.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from support.ctl import console_commands, walk_commands

from queue_engine.foundation import settings as table
from queue_engine.foundation.errors import ConfigError
from queue_engine.operator import stats
from queue_engine.orchestrator import orchestrator as orchestrator_module
from queue_engine.orchestrator.orchestrator import OrchestratorSettings
from queue_engine.orchestrator.pruner import Retention
from queue_engine.scheduler import scheduler as scheduler_module
from queue_engine.scheduler.scheduler import SchedulerSettings
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


def _orchestrator() -> OrchestratorSettings:
    return OrchestratorSettings.from_env("", "queue_engine")


def _scheduler() -> SchedulerSettings:
    return SchedulerSettings.from_env("", "queue_engine")


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
    assert SchedulerSettings(dsn="", schema="queue_engine").reconnect_max_s == default
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
    direct_orch = OrchestratorSettings(dsn="", schema="queue_engine")
    for field, setting in orchestrator_module.ENV_FIELDS.items():
        assert getattr(orch, field) == getattr(direct_orch, field) == setting.default, field
    sched = _scheduler()
    direct_sched = SchedulerSettings(dsn="", schema="queue_engine")
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


def _literal(node: ast.expr) -> object:
    """The value of a literal number (``3600.0``, ``7 * 86400``) or tuple of texts; else None."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float, str):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        return -value if isinstance(value, int | float) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
        left, right = _literal(node.left), _literal(node.right)
        if isinstance(left, int | float) and isinstance(right, int | float):
            return left * right if isinstance(node.op, ast.Mult) else left + right
        return None
    if isinstance(node, ast.Tuple):
        items = [_literal(item) for item in node.elts]
        return tuple(items) if all(isinstance(i, str) for i in items) else None
    return None


def _copies_of_the_table(tree: ast.Module) -> Iterator[tuple[str, int, str]]:
    """Module constants holding a literal copy of a setting's default or choices.

    A copy is a constant named after a setting (``SWEEP_DEFAULT_S`` or
    ``DEFAULT_SWEEP_S`` for ``SWEEP_S``; the table's own ``DEAD_AFTER_BEATS``)
    with the same literal value, or a tuple of texts equal to a setting's choices.
    """
    constants = {n: v for n, v in vars(table).items() if n.isupper() and isinstance(v, int)}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value_node = getattr(node, "value", None)
        if not isinstance(target, ast.Name) or value_node is None:
            continue
        name, value = target.id, _literal(value_node)
        if value is None:
            continue
        if isinstance(value, tuple):
            for setting in table.SETTINGS.values():
                if setting.choices and value == setting.choices:
                    yield name, node.lineno, f"the choices of {setting.env}"
            continue
        stem = "_".join(word for word in name.split("_") if word != "DEFAULT")
        setting = table.SETTINGS.get(name) or table.SETTINGS.get(stem)
        if setting is not None and setting.default == value:
            yield name, node.lineno, f"the default of {setting.env}"
        elif constants.get(name) == value:
            yield name, node.lineno, f"settings.{name}"


def test_modules_read_their_defaults_from_the_table() -> None:
    # Before: CONNECT_RETRY_DEFAULT_S = 10.0 in three modules and nine more literal copies
    # (SWEEP_DEFAULT_S, HEARTBEAT_DEFAULT_S, the watchdog's graces, DEAD_AFTER_BEATS,
    # LOG_FORMATS, ...), held to the table one by one by a 14-assert test.
    package = REPO_ROOT / "queue_engine"
    copies = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {name} copies {what}; read it from the table"
        for path in sorted(package.rglob("*.py"))
        if path != package / "foundation" / "settings.py"
        for name, line, what in _copies_of_the_table(ast.parse(path.read_text()))
    ]
    assert not copies, "\n".join(copies)


def test_a_copy_of_the_table_is_recognised() -> None:
    copies = "CONNECT_RETRY_DEFAULT_S = 10.0\nDEFAULT_TIMEOUT_S = 3600\nDEAD_AFTER_BEATS = 3\n"
    copies += "RETAIN = 7 * 86400\nRETAIN_SUCCEEDED_S: float = 7 * 86400.0\nF = ('text', 'json')\n"
    found = [name for name, _, _ in _copies_of_the_table(ast.parse(copies))]
    assert found == [
        "CONNECT_RETRY_DEFAULT_S",
        "DEFAULT_TIMEOUT_S",
        "DEAD_AFTER_BEATS",
        "RETAIN_SUCCEEDED_S",
        "F",
    ]
    # Another value under a setting's name is another thing (queue-web's poll is not the worker's).
    unrelated = "POLL_DEFAULT_S = 10.0\nSWEEP_DEFAULT_S = table.SWEEP_S.default\n"
    assert list(_copies_of_the_table(ast.parse(unrelated))) == []


# -- the table drives the command lines ---------------------------------------------------------


def _same(shown: str, expected: str) -> bool:
    """``1.0``, ``default 1`` and ``1: what it means`` show the default 1; words must match."""
    shown = re.split(r"[;:]", shown.removeprefix("default "))[0].strip()
    try:
        return float(shown) == float(expected)
    except ValueError:
        return shown == expected


def test_click_options_take_their_variable_default_and_help_from_the_table() -> None:
    from queue_engine.cli.common import option_help

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
                assert param.help == option_help(setting), f"{path} {setting.option}"
                used.add(setting.name)
            for setting, default in re.findall(
                r"(QUEUE_ENGINE_[A-Z_]+) \(([^)]*)\)", command.help or ""
            ):
                shown = table.by_env(setting).shown_default.strip("`")
                assert _same(default, shown), f"{path} help: {setting} ({default}), table: {shown}"
    with_option = {s.name for s in table.SETTINGS.values() if s.option is not None}
    assert used == with_option


def test_an_options_help_is_its_settings_doc() -> None:
    from queue_engine.cli.common import option_help, setting_option

    assert option_help(table.HTTP_HOST) == "Address the metrics server binds to."
    assert option_help(table.QUEUE) == "The queue the worker serves (required)."
    with pytest.raises(TypeError, match="the help comes from the table"):
        setting_option(table.HTTP_HOST, help="Where to listen.")


# -- one duration grammar ---------------------------------------------------------------------

#: Every command-line option that takes a duration: (command path, option).
DURATION_OPTIONS = [
    ("queue-claim-worker", "--max-age"),
    ("queue-ctl list", "--older-than"),
    ("queue-ctl prune", "--older-than"),
]


def _option(path: str, flag: str) -> tuple[click.Command, click.Parameter]:
    for prog, root in console_commands().items():
        for command_path, command in walk_commands(root, prog):
            if command_path == path:
                for param in command.params:
                    if flag in param.opts:
                        return command, param
    raise LookupError(f"{path} {flag}")


@pytest.mark.parametrize(("path", "flag"), DURATION_OPTIONS)
@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("2w", 14 * 86400.0), ("1.5W", 1.5 * 7 * 86400), ("36h", 36 * 3600.0), ("90", 90.0)],
)
def test_every_duration_option_reads_the_settings_grammar(
    path: str, flag: str, raw: str, seconds: float
) -> None:
    # Before: `queue-claim-worker --max-age 2w` was refused ("use s, m, h or d") while
    # `queue-ctl prune --older-than 2w` meant two weeks; `list --older-than 1.5W` was refused.
    command, param = _option(path, flag)
    assert param.process_value(click.Context(command), raw) == seconds == table.parse_duration(raw)


@pytest.mark.parametrize(("path", "flag"), DURATION_OPTIONS)
def test_a_bad_duration_option_is_one_line_naming_the_grammar(path: str, flag: str) -> None:
    command, param = _option(path, flag)
    with pytest.raises(click.BadParameter) as info:
        param.process_value(click.Context(command), "2 weeks")
    message = info.value.format_message()
    assert flag in message and "'2 weeks' is not a duration: use seconds" in message
    assert "\n" not in message


def test_a_duration_option_of_a_setting_keeps_its_bounds() -> None:
    command, param = _option("queue-claim-worker", "--max-age")
    ctx = click.Context(command)
    with pytest.raises(click.BadParameter, match=r"'0.5s' must be at least 1 \(or 0 to turn"):
        param.process_value(ctx, "0.5s")
    assert param.process_value(ctx, "0") == 0.0  # off
    assert param.process_value(ctx, "") is None  # empty is unset, as in the environment


def test_no_other_option_takes_a_duration() -> None:
    from queue_engine.cli.common import Duration

    found = set()
    for prog, root in console_commands().items():
        for path, command in walk_commands(root, prog):
            for param in command.params:
                help_text = getattr(param, "help", None) or ""
                if isinstance(param.type, Duration) or table.DURATION_FORMS in help_text:
                    assert isinstance(param.type, Duration), f"{path} {param.opts[0]}"
                    found.add((path, param.opts[0]))
    assert found == set(DURATION_OPTIONS)


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
