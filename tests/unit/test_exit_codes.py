"""The exit-code contract lives in one place: ``queue_engine.foundation.exit_codes.ExitCode``.

- ``docs/reference/exit-codes.md`` lists exactly the enum's codes, each with
  its member name, and its exception table gives each exception's real code;
- no module of the package exits with a literal number: ``sys.exit(2)``,
  ``os._exit(75)``, ``fail(..., 130)``, ``exit_code = 1`` or ``EXIT_X = 76``
  and a command returning ``0`` are all caught by a scan of the source.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

import queue_engine
from queue_engine.foundation import errors
from queue_engine.foundation.exit_codes import ExitCode

PACKAGE_DIR = Path(queue_engine.__file__).resolve().parent
DOC = PACKAGE_DIR.parent / "docs" / "reference" / "exit-codes.md"
#: Calls whose argument is an exit status (``fail(prog, message, code)``: the last one).
_EXIT_CALLS = {"sys.exit", "os._exit", "self.exit", "exit", "fail", "ctx.exit"}


def _doc_codes() -> dict[int, str]:
    codes: dict[int, str] = {}
    for line in DOC.read_text().splitlines():
        match = re.match(r"^\| (\d+) \| `([A-Z_]+)` \|", line)
        if match is not None:
            assert int(match.group(1)) not in codes, f"code {match.group(1)} listed twice"
            codes[int(match.group(1))] = match.group(2)
    return codes


def test_the_exit_codes_page_lists_exactly_the_enum() -> None:
    assert _doc_codes() == {int(code): code.name for code in ExitCode}


def test_the_exception_table_gives_each_exceptions_code() -> None:
    rows = dict(
        re.findall(r"^\| `([A-Za-z]+)`[^|]* \| (\d+) \|$", DOC.read_text(), flags=re.MULTILINE)
    )
    classes = {
        name: cls
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.QueueEngineError) and cls.__module__ == errors.__name__
    }
    assert set(rows) == set(classes)
    for name, code in rows.items():
        assert classes[name].exit_code == int(code), name
        assert isinstance(classes[name].exit_code, ExitCode), name


def _literal_int(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int)
        and not isinstance(node.value, bool)
    )


def _literal_exits(source: str, name: str, *, in_cli: bool) -> list[str]:
    """Exit statuses written as numbers in ``source``; a CLI module may not return one either."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=name)):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Call) and ast.unparse(node.func) in _EXIT_CALLS and node.args:
            if _literal_int(node.args[-1]):
                found.append(f"{where} {ast.unparse(node)}")
        elif isinstance(node, ast.Assign | ast.AnnAssign) and _literal_int(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                label = (
                    target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                )
                if label == "exit_code" or label.startswith("EXIT_"):
                    found.append(f"{where} {ast.unparse(node)}")
        elif in_cli and isinstance(node, ast.Return) and _literal_int(node.value):
            found.append(f"{where} {ast.unparse(node)}")
    return found


@pytest.mark.parametrize(
    "path", sorted(PACKAGE_DIR.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE_DIR))
)
def test_no_module_exits_with_a_literal_code(path: Path) -> None:
    if path.name == "exit_codes.py":
        return
    found = _literal_exits(
        path.read_text(), str(path.relative_to(PACKAGE_DIR)), in_cli=path.parent.name == "cli"
    )
    assert found == [], "use queue_engine.foundation.exit_codes.ExitCode"


def test_the_scan_finds_literal_exits() -> None:
    sample = (
        "import os, sys\n"
        "EXIT_X = 76\n"
        "class E:\n    exit_code = 1\n"
        "def f():\n    sys.exit(2)\n    os._exit(75)\n    fail('p', 'm', 130)\n    return 0\n"
    )
    assert len(_literal_exits(sample, "cli/sample.py", in_cli=True)) == 6
    assert len(_literal_exits(sample, "sample.py", in_cli=False)) == 5
    assert _literal_exits("sys.exit(ExitCode.USAGE)\nreturn_code = 0\n", "ok.py", in_cli=True) == []
