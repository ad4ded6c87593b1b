"""The package reads in wings, from the ground up, with no import cycles.

``docs/internals/architecture.md`` describes the wings; this module holds the
code to them. Every module under ``queue_engine/`` is parsed with :mod:`ast`
(nothing is imported, so a module with import-time side effects cannot hide an
edge) and every ``import``/``from ... import`` becomes an edge of the graph:

- **all** of them count, at module level, inside functions and under
  ``if TYPE_CHECKING:``. A function-level import still runs (later), so a
  cycle through one is still a circle a reader has to untangle, and it is how
  circles hide ("import it inside the function and the error goes away");
  a ``TYPE_CHECKING`` import never runs, but it is still a dependency of the
  module's meaning, and none is needed across wings today;
- ``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
  else to ``pkg`` (the package's ``__init__``);
- the implicit import of a parent package (``import a.b`` runs ``a/__init__``)
  is not an edge: every module would otherwise depend on ``queue_engine``
  itself. What a bare ``import queue_engine`` loads at run time is tested
  separately, in a subprocess, below.

A module's wing is its folder under ``queue_engine/`` (:data:`WINGS`), and
the package root holds the public facade alone. From the ground up:

- ``foundation``: connections, settings, errors, logs, SQL, migrations;
  imports only the foundation;
- ``producer``: the API an application codes against (clients, tasks, a
  handler's context, workflows, schedules); imports the foundation;
- ``operator``: what an operator reads and changes (figures, controls, roles,
  how a job reads); imports the foundation and the producer API, whose
  records it reads (a job's status, a workflow's nodes): an operator's tool
  acts on what producers made, and never the other way round;
- ``daemon``: ``daemon/`` (what every daemon shares), ``worker/``,
  ``orchestrator/`` and ``scheduler/``; imports the three wings below, its
  own package and ``daemon/``, never another daemon's package, the facade or
  a face;
- ``api``: ``queue_engine/__init__``, the public facade; imports the
  foundation and the producer API (a producer's import loads no operator
  tool and no daemon);
- ``face``: ``cli/``, ``web/``, ``testing/`` and ``demo/``, the programs and
  kits people run; import any wing and the facade, and of the other faces
  only those :data:`FACE_IMPORTS` names (``demo`` builds on ``cli``, and
  ``cli``'s ``queue-web`` script starts ``web``): nothing imports a face
  from below.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import queue_engine

PACKAGE_DIR = Path(queue_engine.__file__).resolve().parent
ROOT = "queue_engine"

#: Each wing and its folders (``queue_engine.<folder>`` and everything under it).
WINGS: dict[str, tuple[str, ...]] = {
    "foundation": ("foundation",),
    "producer": ("producer",),
    "operator": ("operator",),
    "daemon": ("daemon", "worker", "orchestrator", "scheduler"),
    "face": ("cli", "web", "testing", "demo"),
}
#: What a wing may import besides itself (``api`` is the package root, the facade).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "foundation": frozenset(),
    "producer": frozenset({"foundation"}),
    "operator": frozenset({"foundation", "producer"}),
    "daemon": frozenset({"foundation", "producer", "operator"}),
    "api": frozenset({"foundation", "producer"}),
    "face": frozenset({"foundation", "producer", "operator", "daemon", "api"}),
}
#: The package every daemon may share (the common runtime).
SHARED_DAEMON_PACKAGE = "daemon"
#: The other faces a face may import (each may import its own folder).
FACE_IMPORTS: dict[str, frozenset[str]] = {
    "demo": frozenset({"cli"}),
    "cli": frozenset({"web"}),
    "web": frozenset(),
    "testing": frozenset(),
}

#: Edges that break a wing rule today, each in code another change owns.
#: A listed edge that no longer exists fails the test: delete its line.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}

#: Modules ``import queue_engine`` must not load: a producer that only enqueues
#: pays for none of the daemons' machinery, the operator's tools or the faces.
NOT_LOADED_BY_PUBLIC_API = (
    "queue_engine.operator",
    "queue_engine.daemon",
    "queue_engine.worker",
    "queue_engine.orchestrator",
    "queue_engine.scheduler",
    "queue_engine.cli",
    "queue_engine.web",
    "queue_engine.testing",
    "queue_engine.demo",
)


@dataclass(frozen=True)
class Edge:
    """One import statement: ``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return _modules()[module].name == "__init__.py"


def _resolve_relative(module: str, level: int, name: str | None) -> str:
    package = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{name}" if name else package


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The internal modules one import statement loads."""
    modules = _modules()
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name in modules:
                yield alias.name
        return
    base = _resolve_relative(module, node.level, node.module) if node.level else node.module
    if base is None or not (base == ROOT or base.startswith(ROOT + ".")):
        return
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        if candidate in modules:
            yield candidate
        elif base in modules:
            yield base


@cache
def import_graph() -> tuple[Edge, ...]:
    """Every import edge between modules of the package, function-level ones included."""
    edges: list[Edge] = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges.extend(
                    Edge(module, target, node.lineno)
                    for target in _targets(module, node)
                    if target != module
                )
    return tuple(edges)


def _cycles(edges: tuple[Edge, ...]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    successors: dict[str, set[str]] = {m: set() for m in _modules()}
    for e in edges:
        successors[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(successors[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(successors):
        if v not in index:
            visit(v)
    return found


def folder(module: str) -> str:
    """The module's folder under ``queue_engine/`` (``worker`` for ``queue_engine.worker.loop``)."""
    return module.split(".")[1]


def wing(module: str) -> str | None:
    """``api`` for the package root, else the wing of the module's folder (None: in no wing)."""
    if module == ROOT:
        return "api"
    return next((name for name, folders in WINGS.items() if folder(module) in folders), None)


def violation(source: str, target: str) -> str | None:
    """Why ``source`` may not import ``target``, or None when it may."""
    src, dst = wing(source), wing(target)
    if src is None or dst is None:
        return f"{source if src is None else target} is in no wing"
    if src == dst:
        if src == "daemon":
            own, other = folder(source), folder(target)
            if other not in (own, SHARED_DAEMON_PACKAGE):
                return f"daemon package {own!r} imports another daemon's package ({other!r})"
        if src == "face":
            own, other = folder(source), folder(target)
            if other != own and other not in FACE_IMPORTS[own]:
                return f"the face {own!r} imports the face {other!r}"
        return None
    if dst not in MAY_IMPORT[src]:
        return f"a {src} module imports the {dst} wing"
    return None


def _violations() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for e in import_graph():
        reason = violation(e.source, e.target)
        if reason is not None:
            where = f"{_modules()[e.source].relative_to(PACKAGE_DIR.parent)}:{e.line}"
            found.setdefault((e.source, e.target), []).append(f"{where}: {reason}")
    return found


def test_the_graph_sees_every_kind_of_import() -> None:
    """Sanity: module-level, function-level, relative and ``from pkg import module`` edges."""
    pairs = {(e.source, e.target) for e in import_graph()}
    assert len(_modules()) > 40
    client, db = "queue_engine.producer.client", "queue_engine.foundation.db"
    assert (client, "queue_engine.producer.operations") in pairs  # from pkg import module
    assert (client, db) in pairs  # from module import name
    # function-level: context.py imports the client inside a method
    assert any(
        e.source == "queue_engine.producer.context" and e.target == client and e.line > 100
        for e in import_graph()
    )
    assert _resolve_relative("queue_engine.worker.loop", 1, "store") == "queue_engine.worker.store"
    assert _resolve_relative("queue_engine.worker", 2, "db") == "queue_engine.db"


def test_cycle_detection_finds_a_circle() -> None:
    """Sanity: the detector reports a two-module circle and nothing for a chain."""
    a, b = "queue_engine.producer.client", "queue_engine.foundation.db"
    c = "queue_engine.foundation.errors"
    assert _cycles((Edge(a, b, 1), Edge(b, c, 1))) == []
    assert _cycles((Edge(a, b, 1), Edge(b, a, 1), Edge(b, c, 1))) == [sorted([a, b])]


def test_no_import_cycles() -> None:
    """No circle among the package's modules, counting function-level imports."""
    edges = import_graph()
    problems = []
    for component in _cycles(edges):
        members = set(component)
        inside = sorted(
            {
                f"  {_modules()[e.source].relative_to(PACKAGE_DIR.parent)}:{e.line} -> {e.target}"
                for e in edges
                if e.source in members and e.target in members
            }
        )
        problems.append("cycle among " + ", ".join(component) + ":\n" + "\n".join(inside))
    assert not problems, "\n".join(problems)


def test_every_module_is_in_a_wing() -> None:
    """The package root holds the facade alone; a new module or folder says which wing it is."""
    homeless = sorted(m for m in _modules() if wing(m) is None)
    assert not homeless, (
        f"modules in no wing (move them into one, or name their folder in WINGS): {homeless}"
    )


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        # the ground: the foundation imports only itself
        ("queue_engine.foundation.migrate", "queue_engine.foundation.table_statistics", True),
        ("queue_engine.foundation.db", "queue_engine.producer.client", False),
        ("queue_engine.foundation.logs", "queue_engine.daemon.service", False),
        # producer and operator
        ("queue_engine.producer.client", "queue_engine.foundation.db", True),
        ("queue_engine.producer.jobs", "queue_engine.operator.stats", False),
        ("queue_engine.producer.client", "queue_engine.worker.store", False),
        ("queue_engine.producer.client", "queue_engine", False),
        ("queue_engine.operator.controls", "queue_engine.producer.validation", True),
        ("queue_engine.operator.stats", "queue_engine.daemon.service", False),
        ("queue_engine.operator.stats", "queue_engine.cli.views", False),
        # daemons
        ("queue_engine.worker.loop", "queue_engine.foundation.db", True),
        ("queue_engine.orchestrator.metrics", "queue_engine.operator.stats", True),
        ("queue_engine.scheduler.ticker", "queue_engine.daemon.heartbeat", True),
        ("queue_engine.scheduler.ticker", "queue_engine.orchestrator.leader", False),
        ("queue_engine.worker.loop", "queue_engine.orchestrator.metrics", False),
        ("queue_engine.scheduler.scheduler", "queue_engine", False),
        ("queue_engine.worker.loop", "queue_engine.cli.common", False),
        ("queue_engine.worker.loop", "queue_engine.testing.drain", False),
        ("queue_engine.worker.loop", "queue_engine.web.state", False),
        # the facade
        ("queue_engine", "queue_engine.producer.schedules", True),
        ("queue_engine", "queue_engine.foundation.migrate", True),
        ("queue_engine", "queue_engine.operator.stats", False),
        ("queue_engine", "queue_engine.scheduler.ticker", False),
        # faces
        ("queue_engine.cli.ctl", "queue_engine.orchestrator.pruner", True),
        ("queue_engine.cli.web", "queue_engine.web.app", True),
        ("queue_engine.cli.ctl", "queue_engine.demo.demo", False),
        ("queue_engine.demo.demo", "queue_engine.cli.context", True),
        ("queue_engine.demo.workflow", "queue_engine", True),
        ("queue_engine.testing.drain", "queue_engine.worker.loop", True),
        ("queue_engine.testing.drain", "queue_engine.cli.common", False),
        ("queue_engine.web.app", "queue_engine.producer.operations", True),
        ("queue_engine.web.app", "queue_engine.scheduler.store", True),
        ("queue_engine.web.app", "queue_engine.cli.common", False),
        ("queue_engine.producer.operations", "queue_engine.web.app", False),
        # a module in no wing
        ("queue_engine.stray", "queue_engine.foundation.db", False),
    ],
)
def test_wing_rules(source: str, target: str, allowed: bool) -> None:
    """The rules themselves, on examples (so a loosened rule is noticed)."""
    assert (violation(source, target) is None) is allowed


def test_wings() -> None:
    """Every import runs down the wings or within one; no daemon imports another's package."""
    found = _violations()
    unexpected = {pair: lines for pair, lines in found.items() if pair not in KNOWN_EXCEPTIONS}
    assert not unexpected, "\n".join(line for lines in unexpected.values() for line in lines)
    stale = sorted(set(KNOWN_EXCEPTIONS) - set(found))
    assert not stale, f"known exceptions that no longer occur (delete them): {stale}"


def test_import_queue_engine_loads_no_daemon_machinery() -> None:
    """A producer that uses every public name loads no daemon, operator tool or face.

    The package loads its names on first use, so the probe asks for all of them.
    """
    probe = (
        "import sys\n"
        "from queue_engine import *\n"
        "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('queue_engine'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "queue_engine.producer.client" in out  # the probe does see the package's modules
    loaded = [
        m
        for m in out
        for banned in NOT_LOADED_BY_PUBLIC_API
        if m == banned or m.startswith(banned + ".")
    ]
    assert not loaded, f"`import queue_engine` loads {loaded}"


def _type_checking_imports() -> dict[str, str]:
    """The package root's ``if TYPE_CHECKING:`` imports: public name -> its module."""
    tree = ast.parse((PACKAGE_DIR / "__init__.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module, ast.unparse(stmt)
                found.update({alias.name: stmt.module for alias in stmt.names})
    return found


def test_public_names_are_listed_once_in_three_places() -> None:
    """The root's lazy names (``_PUBLIC``), its typed imports and ``__all__`` agree.

    ``import queue_engine`` loads nothing (every console script imports the
    package first); a name is imported from ``_PUBLIC``'s module on first use,
    and type checkers read the ``TYPE_CHECKING`` imports, so the three must
    name the same things in the same modules.
    """
    public = queue_engine._PUBLIC
    assert _type_checking_imports() == public
    assert sorted(queue_engine.__all__) == sorted(public)
    for name, module in public.items():
        assert getattr(queue_engine, name) is getattr(importlib.import_module(module), name)
    assert set(public) <= set(dir(queue_engine))
    with pytest.raises(AttributeError):
        _ = queue_engine.no_such_name


def test_import_queue_engine_alone_loads_nothing_else() -> None:
    """``import queue_engine`` (which every ``import queue_engine.x`` runs) imports no module of it."""
    probe = "import sys, queue_engine\nprint(sorted(m for m in sys.modules if m.startswith('queue_engine')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['queue_engine']"


def test_architecture_page_names_every_module() -> None:
    """docs/internals/architecture.md has a line for every module (a new one needs its line)."""
    page = (PACKAGE_DIR.parent / "docs" / "internals" / "architecture.md").read_text()
    missing = []
    for module, path in _modules().items():
        relative = path.relative_to(PACKAGE_DIR).as_posix()
        if path.name == "__init__.py" and module != ROOT:
            # a catalogue of statements has its folder's line
            catalogue = path.parent.relative_to(PACKAGE_DIR).as_posix() + "/"
            if path.parent.name == "sql" and f"`{catalogue}`" not in page:
                missing.append(catalogue)
            continue  # a package is described by its modules
        if f"`{relative}`" not in page:
            missing.append(relative)
    assert not missing, f"modules without a line in docs/internals/architecture.md: {missing}"
