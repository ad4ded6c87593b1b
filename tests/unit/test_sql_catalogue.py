"""Every named SQL file is used, every name asked for has a file, each loaded as it is written.

The files of ``queue_engine/foundation/sql/`` are the catalogue of the
engine's statements (docs/internals/sql.md), and ``queue_engine/demo/sql/``
the demo's and the bench's own (reports no engine process sends), loaded the
same way. Nothing checks a name at import time: a statement the code asks for
and nobody ships fails only when that code path runs (an outage's repair, a
prune), and a file nobody asks for any more is dead SQL that still reads as if
it ran. This module is the check, static like ``test_log_events.py`` so that
it covers every path:

- every call of a catalogue's loaders (``queries.query``, ``queries.plain``,
  ``queries.source``) under ``queue_engine/``, ``tests/``, ``bench/`` and
  ``examples/`` is found with :mod:`ast`, and its name argument resolved: a
  literal, a conditional of literals, a local variable assigned them, a
  function returning them, or a parameter of the enclosing function, followed
  to that function's callers (``raw_statement("finish_and_claim_jobs", ...)``,
  ``_ledger_sql("ledger_create", ...)``);
- every name the package asks for has a file in the catalogue it asks, and
  every file is asked for by the package (a file only tests or benches use
  would ship dead SQL); a name is one file, in one catalogue;
- every file is loaded the way its text is composed: ``plain`` only for a
  file without ``__SCHEMA__`` (it would reach the server as written), a file
  with ``{name}`` placeholders only inside ``sql.SQL(...)`` (psycopg's
  composition), a file with line tags only by the statement compiler.

A name in the package that this module cannot resolve fails the test on
purpose: teach :func:`_resolve` the new shape rather than loosening the scan.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from psycopg import sql

import queue_engine
from queue_engine.foundation.sql.compiler import _BLOCK_TAG, _LINE_TAG, select_variant

PACKAGE_DIR = Path(queue_engine.__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
#: Each catalogue of named statements: its module (the loaders) and its folder (the files).
CATALOGUES = {
    "queue_engine.foundation.sql": PACKAGE_DIR / "foundation" / "sql",
    "queue_engine.demo.sql": PACKAGE_DIR / "demo" / "sql",
}
ENGINE = "queue_engine.foundation.sql"
#: Where code that asks for named statements lives; only the package's uses count as use.
AREAS = ("queue_engine", "tests", "bench", "examples")
#: The functions of a catalogue whose first argument names a file.
LOADERS = frozenset({"query", "plain", "source"})
#: The module that compiles line-tagged files into their variants.
COMPILER = "queue_engine/foundation/sql/compiler.py"

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


# -- parsing -------------------------------------------------------------------------


@cache
def _sources() -> tuple[Path, ...]:
    return tuple(
        path
        for area in AREAS
        for path in sorted((REPO_ROOT / area).rglob("*.py"))
        if ".venv" not in path.parts
    )


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(_text(path), filename=str(path))


def _shown(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def _callee(call: ast.Call) -> str:
    """The called name: ``f`` for ``f(...)``, ``obj.f(...)`` and ``self.f(...)``."""
    return ast.unparse(call.func).rsplit(".", 1)[-1]


@cache
def _parents(path: Path) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(_tree(path)) for child in ast.iter_child_nodes(node)}


def _enclosing_function(path: Path, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    parents = _parents(path)
    current = parents.get(node)
    while current is not None and not isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef):
        current = parents.get(current)
    return current


@cache
def _loader_names(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(names bound to a catalogue module, names bound to one of its loaders) -> the catalogue."""
    modules: dict[str, str] = {}
    loaders: dict[str, str] = {}
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                if f"{node.module}.{a.name}" in CATALOGUES:
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
                elif node.module in CATALOGUES and a.name in LOADERS:
                    loaders[a.asname or a.name] = node.module
        elif isinstance(node, ast.Import):
            modules |= {a.asname: a.name for a in node.names if a.name in CATALOGUES and a.asname}
    return modules, loaders


def _catalogue_of_call(path: Path, call: ast.Call) -> str | None:
    """The catalogue whose loader ``call`` calls, or None when it calls no loader."""
    modules, loaders = _loader_names(path)
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in LOADERS:
        return modules.get(func.value.id) if isinstance(func.value, ast.Name) else None
    return loaders.get(func.id) if isinstance(func, ast.Name) else None


#: A catalogue's own module: its loaders call the engine's on a parameter, not a name.
_CATALOGUE_FILES = frozenset(
    (folder / "__init__.py").relative_to(REPO_ROOT).as_posix() for folder in CATALOGUES.values()
)


def _calls_named(name: str, paths: tuple[Path, ...]) -> list[tuple[Path, ast.Call]]:
    return [
        (path, node)
        for path in paths
        if f"{name}(" in _text(path)  # most files cannot call it: skip the walk
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call) and _callee(node) == name
    ]


def _functions_named(name: str, path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [
        node
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
    ]


# -- resolving a name argument --------------------------------------------------------


@dataclass(frozen=True)
class Asked:
    """One name a call site asks for: ``where`` holds the literal, ``loaded`` the loader call."""

    name: str
    where: str
    loader: str
    loaded: str
    composed: bool  # the loader's text goes straight into ``sql.SQL(...)``
    catalogue: str  # the module whose loader is called


@dataclass
class Resolved:
    """The literal names an expression can be (each with where it is written), and what is not."""

    names: list[tuple[str, Path, ast.AST]]
    unresolved: list[str]


def _argument(
    call: ast.Call, function: ast.FunctionDef | ast.AsyncFunctionDef, param: str
) -> ast.expr | None:
    """What ``call`` passes for ``function``'s parameter ``param`` (its default if nothing)."""
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    params = [*function.args.posonlyargs, *function.args.args]
    names = [p.arg for p in params]
    if names and names[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        names = names[1:]
    if param in names and names.index(param) < len(call.args):
        return call.args[names.index(param)]
    defaults = {p.arg: d for p, d in zip(params[::-1], function.args.defaults[::-1], strict=False)}
    return defaults.get(param)


def _resolve(path: Path, expr: ast.expr, depth: int = 0) -> Resolved:
    """The literal names ``expr`` (in ``path``) can evaluate to."""
    out = Resolved([], [])
    where = f"{_shown(path)}:{getattr(expr, 'lineno', '?')}"
    if depth > 6:
        out.unresolved.append(f"{where}: followed too far")
    elif isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        out.names.append((expr.value, path, expr))
    elif isinstance(expr, ast.IfExp):
        for branch in (expr.body, expr.orelse):
            _merge(out, _resolve(path, branch, depth + 1))
    elif isinstance(expr, ast.Name):
        _merge(out, _resolve_variable(path, expr, depth))
    elif isinstance(expr, ast.Call):
        # A function of the same file returning the name (``plain_query_name(spec)``).
        returns = [
            node.value
            for function in _functions_named(_callee(expr), path)
            for node in ast.walk(function)
            if isinstance(node, ast.Return) and node.value is not None
        ]
        if not returns:
            out.unresolved.append(f"{where}: {ast.unparse(expr)} returns nothing known")
        for value in returns:
            _merge(out, _resolve(path, value, depth + 1))
    else:
        out.unresolved.append(f"{where}: {ast.unparse(expr)}")
    return out


def _resolve_variable(path: Path, expr: ast.Name, depth: int) -> Resolved:
    out = Resolved([], [])
    where = f"{_shown(path)}:{expr.lineno}"
    function = _enclosing_function(path, expr)
    if function is None:
        out.unresolved.append(f"{where}: {expr.id} outside a function")
        return out
    values = [
        node.value
        for node in ast.walk(function)
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
        )
        or (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == expr.id
        )
    ]
    params = {
        a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)
    }
    if expr.id in params and not values:
        # A parameter: what the function's callers pass. A private function is
        # called from its own module only.
        scope = (path,) if function.name.startswith("_") else _sources()
        callers = _calls_named(function.name, scope)
        if not callers:
            out.unresolved.append(f"{where}: nobody calls {function.name}()")
        for caller_path, call in callers:
            argument = _argument(call, function, expr.id)
            if argument is None:
                out.unresolved.append(f"{_shown(caller_path)}:{call.lineno}: no {expr.id}")
            else:
                _merge(out, _resolve(caller_path, argument, depth + 1))
        return out
    if not values:
        out.unresolved.append(f"{where}: {expr.id} is not assigned in its function")
    for value in values:
        if value is not None:
            _merge(out, _resolve(path, value, depth + 1))
    return out


def _merge(into: Resolved, other: Resolved) -> None:
    into.names += other.names
    into.unresolved += other.unresolved


@cache
def _scan() -> tuple[tuple[Asked, ...], tuple[str, ...]]:
    """Every name asked for by a loader call in :data:`AREAS`, and what could not be resolved."""
    asked: list[Asked] = []
    unresolved: list[str] = []
    for path in _sources():
        if "import sql" not in _text(path) and ".sql import" not in _text(path):
            continue  # imports no loader: skip the walk
        if _shown(path) in _CATALOGUE_FILES:
            continue
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            catalogue = _catalogue_of_call(path, node)
            if catalogue is None:
                continue
            parent = _parents(path).get(node)
            composed = isinstance(parent, ast.Call) and _callee(parent) == "SQL"
            resolved = _resolve(path, node.args[0])
            loaded = f"{_shown(path)}:{node.lineno}"
            unresolved += [f"{problem} (loaded at {loaded})" for problem in resolved.unresolved]
            asked += [
                Asked(
                    name,
                    f"{_shown(where)}:{getattr(literal, 'lineno', '?')}",
                    _callee(node),
                    loaded,
                    composed,
                    catalogue,
                )
                for name, where, literal in resolved.names
            ]
    return tuple(asked), tuple(unresolved)


def asked_by(area: str) -> dict[str, list[Asked]]:
    """Name -> the uses whose literal is written in ``area`` (``queue_engine``, ``tests`` ...)."""
    found: dict[str, list[Asked]] = {}
    for use in _scan()[0]:
        if use.where.split("/", 1)[0] == area:
            found.setdefault(use.name, []).append(use)
    return found


@cache
def _paths() -> tuple[tuple[str, Path], ...]:
    """(catalogue, path) of every statement file."""
    return tuple(
        (catalogue, path)
        for catalogue, folder in CATALOGUES.items()
        for path in sorted(folder.glob("*.sql"))
    )


@cache
def files() -> dict[str, str]:
    """Name -> text of every statement file, of every catalogue."""
    return {path.stem: path.read_text(encoding="utf-8") for _, path in _paths()}


@cache
def catalogue_of() -> dict[str, str]:
    """Name -> the catalogue that holds its file."""
    return {path.stem: catalogue for catalogue, path in _paths()}


def _code(text: str) -> str:
    """``text`` without its comment lines (a comment may name ``{table}`` or ``__SCHEMA__``)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))


# -- the tests -------------------------------------------------------------------------


def test_the_scan_finds_the_known_uses() -> None:
    """Guards the scanner: each shape of name argument the package uses is resolved."""
    package = asked_by("queue_engine")
    assert len(package) >= 90, sorted(package)

    def where(name: str) -> set[str]:
        return {use.where.rsplit(":", 1)[0] for use in package[name]}

    # Through the compiler's raw_statement(name, ...), a parameter followed to its callers.
    assert "queue_engine/worker/store.py" in where("finish_and_claim_jobs")
    assert {u.loaded.rsplit(":", 1)[0] for u in package["finish_and_claim_jobs"]} == {COMPILER}
    assert "queue_engine/foundation/migrate.py" in where(
        "ledger_create"
    )  # _ledger_sql("ledger_create", ...)
    assert "queue_engine/testing/databases.py" in where("create_test_database")  # a method's
    assert "enqueue_plain_defaults" in package  # returned by a function
    assert "enqueue_many_plain_defaults" in package  # a conditional in an annotated assignment
    assert all(use.composed for use in package["ledger_create"])
    assert not any(use.composed for use in package["enqueue"])
    assert "stats_queues" in asked_by("tests") and "finish_and_claim_jobs" in asked_by("bench")


def test_every_name_in_the_package_is_resolved() -> None:
    problems = [
        p for p in _scan()[1] if p.startswith("queue_engine/") or "loaded at queue_engine/" in p
    ]
    assert not problems, "names the scan cannot tell:\n" + "\n".join(problems)


def test_a_name_is_one_file() -> None:
    """A name in two catalogues would read as one statement where it is two."""
    names = [path.stem for _, path in _paths()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {catalogue_of()[n] for n in ("enqueue", "run_stats")} == set(CATALOGUES)


@pytest.mark.parametrize("area", AREAS)
def test_every_name_asked_for_has_a_file(area: str) -> None:
    missing = sorted(
        f"{use.where}: {name} (asked of {use.catalogue})"
        for name, uses in asked_by(area).items()
        for use in uses
        if catalogue_of().get(name) != use.catalogue
    )
    assert not missing, "no <name>.sql in the catalogue asked for:\n" + "\n".join(missing)


def test_every_file_is_used_by_the_package() -> None:
    package = asked_by("queue_engine")
    unused = {name: [] for name in files() if name not in package}
    for area in AREAS[1:]:
        for name, uses in asked_by(area).items():
            if name in unused:
                unused[name] += [use.where for use in uses]
    assert not unused, (
        "files the package never asks for (delete them, or move a test's or bench's "
        f"own SQL next to it): {unused}"
    )


def test_query_is_for_files_that_name_the_schema_and_plain_for_the_others() -> None:
    """``plain`` returns the text as written: a ``__SCHEMA__`` in it would reach the server.

    And ``query`` on a file without one says, wrongly, that the statement
    touches the engine's tables: the loader tells a reader which it does.
    """
    wrong = sorted(
        f"{use.loaded}: {use.loader}({name!r}), "
        + ("use query(name, schema)" if use.loader == "plain" else "use plain(name)")
        for area in AREAS
        for name, uses in asked_by(area).items()
        for use in uses
        if name in files()
        and use.loader in ("plain", "query")
        and ("__SCHEMA__" in _code(files()[name])) != (use.loader == "query")
    )
    assert not wrong, "\n".join(wrong)


def test_files_with_placeholders_are_composed_by_psycopg() -> None:
    """A ``{name}`` placeholder is filled only by ``sql.SQL(text).format(name=...)``."""
    holders = {name: set(_PLACEHOLDER.findall(_code(text))) for name, text in files().items()}
    holders = {name: found for name, found in holders.items() if found}
    assert {"analyze_table", "prune_jobs", "ledger_create"} <= set(holders)  # the scan sees them
    wrong = sorted(
        f"{use.loaded}: {name} has {sorted(holders[name])} but is not loaded into sql.SQL(...)"
        for area in AREAS
        for name, uses in asked_by(area).items()
        for use in uses
        if name in holders and not use.composed
    )
    assert not wrong, "\n".join(wrong)
    for name, found in holders.items():
        # Every other brace would be taken for a placeholder: the file must compose.
        text = sql.SQL(files()[name]).format(**{key: sql.Identifier("x") for key in found})
        assert "{" not in _code(text.as_string(None)), name


def test_line_tagged_files_are_loaded_only_by_the_compiler() -> None:
    """A tagged file read whole would hold every variant at once: invalid SQL."""
    tagged = {
        name
        for name, text in files().items()
        if any(
            _LINE_TAG.search(line) or _BLOCK_TAG.fullmatch(line.strip())
            for line in text.splitlines()
        )
    }
    assert "finish_and_claim_jobs" in tagged
    wrong = sorted(
        f"{use.loaded}: {name}"
        for area in AREAS
        for name, uses in asked_by(area).items()
        for use in uses
        if name in tagged and not use.loaded.startswith(COMPILER + ":")
    )
    assert not wrong, "load these through queue_engine.foundation.sql.compiler:\n" + "\n".join(
        wrong
    )
    for name in tagged:
        select_variant(files()[name], None)  # balanced blocks, or ValueError
