"""The version is written once, in ``queue_engine/foundation/version.py``, and read from there.

Before, ``pyproject.toml`` and ``queue_engine/__init__.py`` each wrote
``0.1.0``; ``--version`` and queue-web read the installed metadata (stale in a
checkout not reinstalled since a bump), and the scheduler and the orchestrator
imported ``__version__`` from the package root inside a function, the only
import that ran back up the layers. Held here: pyproject.toml takes the version
from ``foundation/version.py`` (hatchling), no module of the package reads it another
way, and every console script's ``--version`` states it. The wheel's metadata is
checked in ``tests/packaging/test_wheel.py``; ``/info`` in
``tests/integration/test_web_api_outage.py``.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.ctl import console_commands

import queue_engine
from queue_engine.foundation.version import __version__

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "queue_engine"
VERSION_FILE = PACKAGE / "foundation" / "version.py"


def test_pyproject_takes_the_version_from_the_package() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    assert (
        pyproject["tool"]["hatch"]["version"]["path"]
        == VERSION_FILE.relative_to(REPO_ROOT).as_posix()
    )
    assert queue_engine.__version__ == __version__


def _other_version_sources(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Where a module writes the version or asks the installed metadata for it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == __version__:
            yield node.lineno, f"the literal {__version__!r}"
        if isinstance(node, ast.Call):
            texts = [a.value for a in node.args if isinstance(a, ast.Constant)]
            texts += [k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)]
            if "queue-engine" in texts:
                name = ast.unparse(node.func)
                if name.endswith(("version", "version_option", "metadata")):
                    yield node.lineno, f"{name}(... 'queue-engine' ...): the installed metadata"


def test_no_module_writes_or_looks_up_the_version_elsewhere() -> None:
    found = [
        f"{path.relative_to(REPO_ROOT)}:{line}: {what}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != VERSION_FILE
        for line, what in _other_version_sources(ast.parse(path.read_text()))
    ]
    assert not found, "read queue_engine.foundation.version instead:\n" + "\n".join(found)


def test_a_version_source_is_recognised() -> None:
    code = (
        f"__version__ = {__version__!r}\n"
        "v = version('queue-engine')\n"
        "@click.version_option(package_name='queue-engine', prog_name='x')\n"
        "def f(): pass\n"
        "n = importlib.metadata.version(NAME)\n"
    )
    assert [line for line, _ in _other_version_sources(ast.parse(code))] == [1, 2, 3]


@pytest.mark.parametrize("script", sorted(console_commands()))
def test_every_console_script_states_the_version(script: str) -> None:
    result = CliRunner().invoke(console_commands()[script], ["--version"], prog_name=script)
    assert result.exit_code == 0, result.output
    assert result.output == f"{script}, version {__version__}\n"
