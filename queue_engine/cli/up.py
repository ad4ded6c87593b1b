"""``queue-ctl up``: the whole fleet from one command, for development and small hosts.

It starts one ``queue-orchestrator`` (which migrates), one ``queue-scheduler``
(always: schedules added with ``queue-ctl schedules add`` need it as much as
``@periodic`` declarations of the app do; with no schedule it only sleeps) and
N ``queue-claim-worker`` processes per queue, as real separate processes, and
supervises them (:mod:`queue_engine.cli.supervisor`). The fleet comes from
flags (``--queue NAME=N``, ``--app MODULE``) or a TOML/JSON file
(``--config fleet.toml``)::

    app = "myapp.tasks"
    [queues]
    "load.cbr" = 2
    email = 1
    [env]
    QUEUE_ENGINE_LOG_LEVEL = "DEBUG"

A file may also say ``pythonpath = ["."]``: folders, relative to the file,
put in front of the processes' ``PYTHONPATH``, so an app that lives beside its
fleet file (the recipes under ``examples/``) runs from any working folder.

dataloader's worker list is accepted too: ``WORKERS_JSON`` in the environment
(or ``--workers-json``, which wins over it), ``[{"queue": "load.cbr",
"concurrency": 2}]``, is read as two workers of ``load.cbr`` (one job per
process, so concurrency is processes), and ``up`` says so when it starts.
Flags win over the file and the list (``--app``; a ``--queue`` replaces that
queue's count); the list replaces the file's count of the queues it names.
With no DSN (``--dsn``, the group's ``--dsn`` or ``QUEUE_ENGINE_DSN``) an
embedded Postgres is started for the run, as ``queue-ctl demo`` does.
A bad configuration is one line on stderr and exit 2.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shlex
import sys
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from queue_engine.cli.common import embedded_folder_options
from queue_engine.cli.context import CliContext, pass_cli
from queue_engine.cli.fleet import command_for
from queue_engine.cli.fleet_watch import DatabaseWatch
from queue_engine.cli.supervisor import ChildSpec, Supervisor
from queue_engine.foundation import localfleet
from queue_engine.foundation import settings as table
from queue_engine.foundation.config import DEFAULT_SCHEMA
from queue_engine.foundation.db import describe_dsn
from queue_engine.foundation.embedded import own_server
from queue_engine.foundation.errors import ConfigError, DatabaseUnavailable
from queue_engine.foundation.legacy_settings import parse_workers_json

#: The keys a fleet file may have.
FILE_KEYS = ("app", "queues", "env", "pythonpath")
#: At most this many workers of one queue (a guard against a typo such as ``q=200``).
MAX_PER_QUEUE = 64


@dataclass(frozen=True)
class FleetSpec:
    """What ``queue-ctl up`` runs: the app module, workers per queue, extra environment."""

    app: str
    queues: dict[str, int]
    env: dict[str, str] = field(default_factory=dict)
    #: Folders put in front of the processes' PYTHONPATH (absolute, resolved from the file's).
    pythonpath: tuple[str, ...] = ()

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with the file's ``env`` over it and its ``pythonpath`` in front."""
        env = {**base, **self.env}
        if self.pythonpath:
            rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            env["PYTHONPATH"] = os.pathsep.join([*self.pythonpath, *rest])
        return env


def _count(queue: str, value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PER_QUEUE:
        raise ConfigError(
            f"{where}: workers of queue {queue!r} must be a whole number from 1 to "
            f"{MAX_PER_QUEUE}, not {value!r}"
        )
    return value


def parse_queue_flag(text: str) -> tuple[str, int]:
    """``"email=2"`` -> ``("email", 2)``; ``"email"`` alone means one worker."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not name:
        raise ConfigError(f"--queue {text!r}: expected NAME=N, e.g. --queue email=2")
    if not sep:
        return name, 1
    try:
        number = int(raw.strip())
    except ValueError:
        raise ConfigError(
            f"--queue {text!r}: N must be a whole number, e.g. --queue email=2"
        ) from None
    return name, _count(name, number, "--queue")


def read_file(path: Path) -> dict[str, Any]:
    """The fleet file as a mapping: JSON for ``*.json``, TOML otherwise."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else tomllib.loads(raw.decode())
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid {_kind(path)}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a {_kind(path)} object/table at the top")
    return data


def _kind(path: Path) -> str:
    return "JSON" if path.suffix.lower() == ".json" else "TOML"


def _check_keys(data: Mapping[str, Any], where: str) -> None:
    for key in data:
        if key not in FILE_KEYS:
            close = difflib.get_close_matches(key, FILE_KEYS, n=1)
            hint = f", did you mean {close[0]!r}?" if close else f" (known: {', '.join(FILE_KEYS)})"
            raise ConfigError(f"{where}: unknown key {key!r}{hint}")


def build_config(
    data: Mapping[str, Any],
    app: str | None,
    queue_flags: Iterable[str],
    where: str = "config",
    folder: Path | None = None,
    workers: Mapping[str, int] | None = None,
    workers_where: str = "WORKERS_JSON",
) -> FleetSpec:
    """Merge a fleet file's ``data`` with the flags; a ConfigError (exit 2) on anything wrong.

    ``folder`` is the file's folder: its ``pythonpath`` entries are relative to it.
    ``workers`` (dataloader's ``WORKERS_JSON``, parsed) replaces the file's count
    of the queues it names; the ``--queue`` flags replace both.
    """
    _check_keys(data, where)
    file_app = data.get("app")
    if file_app is not None and (not isinstance(file_app, str) or not file_app.strip()):
        raise ConfigError(f"{where}: 'app' must be a module name, e.g. app = \"myapp.tasks\"")
    queues_data = data.get("queues", {})
    if not isinstance(queues_data, dict):
        raise ConfigError(f"{where}: 'queues' must be a table of queue = workers")
    queues = {str(q): _count(str(q), n, where) for q, n in queues_data.items()}
    for queue, number in (workers or {}).items():
        queues[queue] = _count(queue, number, workers_where)
    for flag in queue_flags:
        name, number = parse_queue_flag(flag)
        queues[name] = number
    env_data = data.get("env", {})
    if not isinstance(env_data, dict):
        raise ConfigError(f"{where}: 'env' must be a table of NAME = value")
    env: dict[str, str] = {}
    for key, value in env_data.items():
        if isinstance(value, dict | list) or value is None:
            raise ConfigError(f"{where}: env {key!r} must be a string, number or boolean")
        env[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    pythonpath = _pythonpath(data.get("pythonpath", []), where, folder or Path.cwd())
    chosen = app or file_app
    if not chosen:
        raise ConfigError('no app module: pass --app MODULE or set app = "..." in --config')
    if not queues:
        raise ConfigError("no queue to work: pass --queue NAME=N or a [queues] table in --config")
    return FleetSpec(app=chosen.strip(), queues=queues, env=env, pythonpath=pythonpath)


def workers_from(flag: str | None, environ: Mapping[str, str]) -> tuple[dict[str, int] | None, str]:
    """``--workers-json``, else ``WORKERS_JSON``, parsed and announced, and which it was.

    The workers are None when neither is set. Reading a variable another
    system left in the environment is said on the first line ``up`` prints,
    never done silently.
    """
    raw, where = (flag, "--workers-json") if flag else (environ.get("WORKERS_JSON"), "WORKERS_JSON")
    if not raw:
        return None, where
    workers = parse_workers_json(raw, where)
    shown = ", ".join(f"{q}={n}" for q, n in workers.items()) or "none"
    click.echo(f"up | workers from {where} (dataloader's list): {shown}")
    return workers, where


def _pythonpath(value: object, where: str, folder: Path) -> tuple[str, ...]:
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, list) or not all(isinstance(e, str) and e for e in entries):
        raise ConfigError(f"{where}: 'pythonpath' must be a folder or a list of folders")
    return tuple(str((folder / entry).resolve()) for entry in entries)


def child_specs(
    config: FleetSpec, dsn: str, schema: str, env: Mapping[str, str]
) -> list[ChildSpec]:
    """The orchestrator, the scheduler, then the workers of each queue, as the supervisor runs them."""
    common = ("--dsn", dsn, "--schema", schema)
    specs = [
        ChildSpec("orchestrator", [*command_for("queue-orchestrator"), *common], env),
        ChildSpec(
            "scheduler",
            [*command_for("queue-scheduler"), *common, "--app", config.app],
            env,
        ),
    ]
    for queue, count in config.queues.items():
        for n in range(1, count + 1):
            argv = [*command_for("queue-claim-worker"), f"--queue={queue}", "--app", config.app]
            specs.append(ChildSpec(f"worker:{queue}#{n}", [*argv, *common], env, reloadable=True))
    return specs


def app_directory(app: str, env: Mapping[str, str]) -> Path:
    """The folder of the app module, found with the children's ``PYTHONPATH`` (for ``--reload``)."""
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    saved = list(sys.path)
    sys.path[:0] = [*extra, os.getcwd()]
    try:
        spec = importlib.util.find_spec(app)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is None or not spec.origin:
        raise ConfigError(f"--reload: cannot find app module {app!r} (is it on PYTHONPATH?)")
    return Path(spec.origin).parent


class FileWatcher:
    """``--reload``: True when a ``.py`` file under a folder was added, removed or changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.last = self._scan()

    def _scan(self) -> dict[Path, float]:
        found: dict[Path, float] = {}
        for path in self.root.rglob("*.py"):
            try:
                found[path] = path.stat().st_mtime
            except OSError:
                continue
        return found

    def __call__(self) -> bool:
        """Scan again (at most as often as the supervisor asks: see ``interval``)."""
        now = self._scan()
        changed = now != self.last
        self.last = now
        return changed


def throttled(
    check: Callable[[], bool], interval_s: float, clock: Callable[[], float]
) -> Callable[[], bool]:
    """``check`` called at most once per ``interval_s`` (False in between)."""
    next_at = clock() + interval_s

    def call() -> bool:
        nonlocal next_at
        if clock() < next_at:
            return False
        next_at = clock() + interval_s
        return check()

    return call


@click.command()
@click.option(
    "--dsn",
    "local_dsn",
    default=None,
    help="Database to use (overrides queue-ctl --dsn); none: an embedded Postgres.",
)
@click.option(
    "--queue",
    "-q",
    "queue_flags",
    multiple=True,
    metavar="NAME=N",
    help="Run N workers of queue NAME (repeatable).",
)
@click.option("--app", help="Module declaring the tasks (and @periodic schedules).")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A TOML (or .json) fleet file: app, [queues], [env], pythonpath.",
)
@click.option(
    "--workers-json",
    metavar="JSON",
    help='dataloader\'s worker list, [{"queue": "q", "concurrency": 2}] '
    "(default: the WORKERS_JSON variable).",
)
@click.option(
    "--reload",
    is_flag=True,
    help="Development: restart the workers when a .py file under the app's folder changes.",
)
@embedded_folder_options
@pass_cli
def up(
    cli: CliContext,
    local_dsn: str | None,
    queue_flags: tuple[str, ...],
    app: str | None,
    config_path: Path | None,
    workers_json: str | None,
    reload: bool,
    data_dir: Path | None,
    keep: bool,
) -> int:
    """Run an orchestrator, a scheduler and N workers per queue; restart the crashed.

    Ctrl-C (or SIGTERM) stops every process gracefully and exits 0; a second
    one kills them and exits 130. For production, use the systemd units.
    """
    data = read_file(config_path) if config_path else {}
    folder = config_path.parent if config_path else None
    workers, workers_where = workers_from(workers_json, os.environ)
    config = build_config(
        data,
        app,
        queue_flags,
        where=str(config_path or "config"),
        folder=folder,
        workers=workers,
        workers_where=workers_where,
    )
    # The children would each notice the old names up has noticed once already.
    env = {
        **config.environment(os.environ),
        "PYTHONUNBUFFERED": "1",
        table.LEGACY_NOTICE.env: "off",
    }
    watcher = None
    if reload:
        root = app_directory(config.app, env)
        watcher = throttled(FileWatcher(root), 1.0, clock=time.monotonic)
        click.echo(f"up | --reload: watching {root}")
    dsn = local_dsn or cli.given_dsn
    schema = cli.given_schema or DEFAULT_SCHEMA
    running = localfleet.find()
    if not dsn and running is not None:
        raise ConfigError(
            f"a local fleet is already running (queue-ctl up, pid {running.pid}, "
            f"database {running.dsn}): stop it first, or pass --dsn to run more "
            "processes on its database"
        )
    with ExitStack() as stack:
        server = None
        if dsn:
            url = dsn
            click.echo(f"up | database: {describe_dsn(url)} (schema {schema})")
        else:
            click.echo("up | no DSN configured: starting an embedded Postgres ...")
            server = stack.enter_context(own_server(data_dir, keep=keep, purpose="up"))
            url = server.dsn()
            click.echo(f"up | database: {url} (schema {schema}, data in {server.data_dir})")
        if running is None:
            stack.enter_context(
                localfleet.recorded(url, schema, data_dir=server.data_dir if server else None)
            )
            click.echo("up | commands in other shells find this database by themselves; or:")
            if server is not None:
                click.echo(f"export QUEUE_ENGINE_DSN={shlex.quote(url)}")
        else:
            click.echo(
                f"up | queue-ctl up pid {running.pid} stays the local fleet other shells find"
            )
        watch = DatabaseWatch(url, schema, server)
        supervisor = Supervisor(child_specs(config, url, schema, env), changed=watcher, watch=watch)
        code = supervisor.run()
        if server is not None:
            click.echo(
                "up | stopping the embedded Postgres"
                + (f" (its folder is kept: --data-dir {server.data_dir})" if keep else "")
                + " ..."
            )
    if watch.gone is not None:
        raise DatabaseUnavailable(watch.gone)
    return code
