"""Every log event name the code can emit is catalogued, documented and well formed.

Event names are a public contract (see :mod:`queue_engine.foundation.events`), but
:func:`queue_engine.foundation.logs.log_event` never checks them at run time: a typo
must not cost a log line in production. This module is the check, and it is
static so that it covers code paths no unit test runs (shutdown, watchdog
trips, database outages):

- every ``log_event(...)`` call under ``queue_engine/`` is found with
  :mod:`ast`; a string-literal event (or a conditional of literals, or a local
  variable assigned literals) must be catalogued;
- a computed event (an f-string, ``outcome.event``) must come from a known
  generator, and every name the generator can produce must be catalogued:
  ``job.<Outcome kind>`` (kinds read from every ``Outcome(...)`` call),
  ``watchdog.<Trip kind>`` (every ``Trip(...)`` call) and
  ``<Service.name>.<suffix>`` (every concrete Service subclass) and
  ``<role>.<suffix>`` (the daemon runtime's roles, ``DAEMON_ROLES``);
- plain logger calls whose message starts with an event-shaped word
  (``log.info("metrics.serving host=%s", ...)``) count as well;
- every catalogued name matches the naming rule, is emitted somewhere (no stale
  entries) and has a row in ``docs/reference/log-events.md`` whose ``daemon``
  column matches its catalogue group.

A computed name this module does not understand fails the test on purpose:
teach :func:`_expand` the new generator rather than loosening the scan.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import queue_engine
from queue_engine.daemon import DAEMON_ROLES
from queue_engine.daemon.service import Service
from queue_engine.daemon.signals import SIGNAL_ROLES
from queue_engine.foundation.events import EVENT_GROUPS, EVENT_NAME_RE, EVENTS, daemon_of
from queue_engine.worker.outcomes import Outcome

PACKAGE_DIR = Path(queue_engine.__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
DOC = REPO_ROOT / "docs" / "reference" / "log-events.md"

#: Logger methods whose first argument is the message (``log`` takes the level first).
_LOGGER_METHODS = frozenset({"debug", "info", "warning", "error", "exception", "critical"})


# -- parsing -------------------------------------------------------------------


def _sources() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    return f"{shown}:{getattr(node, 'lineno', '?')}"


def _callee(call: ast.Call) -> str | None:
    """The called name: ``f`` for ``f(...)`` and ``mod.f(...)``."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _calls(name: str) -> Iterator[tuple[Path, ast.Call]]:
    for path in _sources():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and _callee(node) == name:
                yield path, node


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    if len(call.args) > position:
        return call.args[position]
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value
    return None


def _enclosing_function(
    tree: ast.Module, target: ast.AST
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose body contains ``target``."""
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and (found is None or node.lineno >= found.lineno)
            and any(child is target for child in ast.walk(node))
        ):
            found = node
    return found


# -- resolving an event argument -------------------------------------------------


@dataclass
class Resolved:
    """What an event expression can evaluate to: literal names, templates, or not known."""

    literals: set[str] = field(default_factory=set)
    #: f-string shapes with each placeholder reduced to its last name: ``job.{kind}``.
    templates: set[str] = field(default_factory=set)
    unresolved: list[str] = field(default_factory=list)

    def add(self, other: Resolved) -> None:
        self.literals |= other.literals
        self.templates |= other.templates
        self.unresolved += other.unresolved


def _placeholder(value: ast.expr) -> str:
    if isinstance(value, ast.Attribute):
        return value.attr
    if isinstance(value, ast.Name):
        return value.id
    return ast.unparse(value)


def _resolve(
    expr: ast.expr,
    scope: ast.FunctionDef | ast.AsyncFunctionDef | None,
    seen: frozenset[str] = frozenset(),
) -> Resolved:
    out = Resolved()
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        out.literals.add(expr.value)
    elif isinstance(expr, ast.IfExp):
        out.add(_resolve(expr.body, scope, seen))
        out.add(_resolve(expr.orelse, scope, seen))
    elif isinstance(expr, ast.JoinedStr):
        parts = []
        for value in expr.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + _placeholder(value.value) + "}")
        out.templates.add("".join(parts))
    elif isinstance(expr, ast.Attribute) and expr.attr == "event":
        # Outcome.event is f"job.{kind}" (checked by test_outcome_event_is_job_kind).
        out.templates.add("job.{kind}")
    elif isinstance(expr, ast.Name) and scope is not None and expr.id not in seen:
        values = [
            node.value
            for node in ast.walk(scope)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in node.targets)
        ] + [
            node.value
            for node in ast.walk(scope)
            if isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == expr.id
            and node.value is not None
        ]
        if not values:
            out.unresolved.append(f"variable {expr.id!r} is never assigned in its function")
        for value in values:
            out.add(_resolve(value, scope, seen | {expr.id}))
    else:
        out.unresolved.append(ast.unparse(expr))
    return out


@dataclass(frozen=True)
class EventSite:
    """One ``log_event`` call and what its event argument can be."""

    where: str
    resolved: Resolved


@cache
def _event_sites() -> tuple[EventSite, ...]:
    sites = []
    for path, call in _calls("log_event"):
        event = _argument(call, 2, "event")
        where = _where(path, call)
        if event is None:
            sites.append(EventSite(where, Resolved(unresolved=["no event argument"])))
            continue
        scope = _enclosing_function(_tree(path), call)
        sites.append(EventSite(where, _resolve(event, scope)))
    return tuple(sites)


# -- the generators of computed names --------------------------------------------


def _kinds(constructor: str, position: int) -> dict[str, str]:
    """Literal ``kind`` arguments of every ``constructor(...)`` call -> where (or a problem)."""
    kinds: dict[str, str] = {}
    for path, call in _calls(constructor):
        kind = _argument(call, position, "kind")
        if isinstance(kind, ast.Constant) and isinstance(kind.value, str):
            kinds.setdefault(kind.value, _where(path, call))
        else:
            kinds[f"<not a literal: {_where(path, call)}>"] = _where(path, call)
    return kinds


@cache
def outcome_kinds() -> frozenset[str]:
    """Every ``Outcome(job_id, attempt, status, kind, ...)`` kind in the package."""
    return frozenset(_kinds("Outcome", 3))


@cache
def trip_kinds() -> frozenset[str]:
    """Every ``Trip(kind, exit_code, message)`` kind in the package."""
    return frozenset(_kinds("Trip", 0))


def _base_name(base: ast.expr) -> str | None:
    if isinstance(base, ast.Subscript):  # Service[Result]
        base = base.value
    if isinstance(base, ast.Name):
        return base.id
    if isinstance(base, ast.Attribute):
        return base.attr
    return None


@cache
def service_classes() -> tuple[type[Service[Any]], ...]:
    """Every Service subclass defined in the package, found statically, then imported."""
    classes: dict[str, tuple[Path, ast.ClassDef]] = {}
    for path in _sources():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef):
                classes[f"{path}:{node.name}"] = (path, node)
    service_names = {"Service"}
    found: dict[str, tuple[Path, ast.ClassDef]] = {}
    changed = True
    while changed:  # transitively: subclasses of subclasses
        changed = False
        for key, (path, node) in classes.items():
            if key not in found and any(_base_name(b) in service_names for b in node.bases):
                found[key] = (path, node)
                service_names.add(node.name)
                changed = True
    result = []
    for path, node in found.values():
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        cls = getattr(importlib.import_module(module), node.name)
        assert issubclass(cls, Service), f"{module}.{node.name} is not a Service subclass"
        result.append(cls)
    return tuple(result)


@cache
def service_names() -> frozenset[str]:
    """The ``name`` of every concrete service: the prefix of its ``.run`` / ``.error`` events."""
    return frozenset(cls.name for cls in service_classes() if not inspect.isabstract(cls))


def _expand(template: str) -> frozenset[str] | None:
    """Every name a known generator produces for ``template``; None for an unknown shape."""
    if template == "job.{kind}":
        return frozenset(f"job.{kind}" for kind in outcome_kinds())
    if template == "watchdog.{kind}":
        return frozenset(f"watchdog.{kind}" for kind in trip_kinds())
    if template.startswith("{name}.") and template.count("{") == 1:
        suffix = template.removeprefix("{name}")
        return frozenset(name + suffix for name in service_names())
    if template.startswith("{role}.") and template.count("{") == 1:
        # The daemon runtime's lifecycle events, one per role that runs on it.
        suffix = template.removeprefix("{role}")
        # A second stop signal is handled for every daemon, the worker included.
        roles = SIGNAL_ROLES if suffix == ".exit_now" else DAEMON_ROLES
        return frozenset(role + suffix for role in roles)
    return None


# -- plain logger calls --------------------------------------------------------------


@cache
def plain_event_names() -> dict[str, str]:
    """``log.info("some.event key=%s", ...)``: event-shaped first words of plain messages."""
    names: dict[str, str] = {}
    for path in _sources():
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr in _LOGGER_METHODS and node.args:
                message = node.args[0]
            elif node.func.attr == "log" and len(node.args) > 1:
                message = node.args[1]
            else:
                continue
            if isinstance(message, ast.Constant) and isinstance(message.value, str):
                words = message.value.split(maxsplit=1)
                if words and EVENT_NAME_RE.match(words[0]):
                    names.setdefault(words[0], _where(path, node))
    return names


def emitted_names() -> set[str]:
    """Every name the code can emit, as far as static analysis sees."""
    names: set[str] = set(plain_event_names())
    for site in _event_sites():
        names |= site.resolved.literals
        for template in site.resolved.templates:
            names |= _expand(template) or set()
    return names


# -- the reference page --------------------------------------------------------------

_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|")


def documented_rows() -> dict[str, list[str]]:
    """Event name -> the ``daemon`` cell of each table row naming it in the reference page."""
    rows: dict[str, list[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match and EVENT_NAME_RE.match(match.group(1)):
            rows.setdefault(match.group(1), []).append(match.group(2))
    return rows


# -- the tests ----------------------------------------------------------------------


def test_the_scan_finds_the_known_call_sites() -> None:
    """Guards the scanner itself: if it found nothing, every other test would pass vacuously."""
    wheres = [site.where for site in _event_sites()]
    assert len(wheres) >= 40, wheres
    assert any(w.startswith("queue_engine/daemon/service.py") for w in wheres)
    assert any(w.startswith("queue_engine/worker/loop.py") for w in wheres)
    assert {"succeeded", "failed", "retry_scheduled", "canceled"} <= outcome_kinds()
    assert {"timeout", "give_back"} <= trip_kinds()
    assert {"reaper", "heartbeat", "scheduler"} <= service_names()


def test_catalogue_names_follow_the_naming_rule() -> None:
    bad = [name for name in EVENTS if not EVENT_NAME_RE.match(name)]
    assert not bad, f"event names must match {EVENT_NAME_RE.pattern}: {bad}"
    assert sum(len(group) for group in EVENT_GROUPS.values()) == len(EVENTS)
    empty = [name for name, meaning in EVENTS.items() if not meaning.strip()]
    assert not empty, f"every event needs a one-line meaning: {empty}"


def test_literal_event_names_are_catalogued() -> None:
    unknown = sorted(
        f"{site.where}: {name}"
        for site in _event_sites()
        for name in site.resolved.literals
        if name not in EVENTS
    )
    assert not unknown, (
        "log_event names missing from queue_engine/foundation/events.py (add them there and to "
        f"docs/reference/log-events.md): {unknown}"
    )


def test_computed_event_names_come_from_known_generators() -> None:
    problems = [
        f"{site.where}: cannot tell which names {expr!r} produces"
        for site in _event_sites()
        for expr in site.resolved.unresolved
    ]
    problems += [
        f"{site.where}: no generator known for f-string shape {template!r}"
        for site in _event_sites()
        for template in site.resolved.templates
        if _expand(template) is None
    ]
    problems += [
        f"{where}: a kind that is not a literal"
        for kinds in (outcome_kinds(), trip_kinds())
        for where in kinds
        if where.startswith("<")
    ]
    assert not problems, "\n".join(problems)


def test_generated_event_names_are_catalogued() -> None:
    missing = sorted(
        f"{site.where}: {template} -> {name}"
        for site in _event_sites()
        for template in site.resolved.templates
        for name in _expand(template) or ()
        if name not in EVENTS
    )
    assert not missing, missing


def test_every_outcome_kind_maps_to_a_catalogued_job_event() -> None:
    for kind in outcome_kinds():
        outcome = Outcome(1, 1, "queued", kind)
        assert outcome.event == f"job.{kind}"
        assert outcome.event in EVENTS, outcome.event


def test_every_service_name_times_every_suffix_is_catalogued() -> None:
    suffixes = {
        template.removeprefix("{name}")
        for site in _event_sites()
        for template in site.resolved.templates
        if template.startswith("{name}.")
    }
    assert {".run", ".error"} <= suffixes
    missing = sorted(
        name + suffix
        for name in service_names()
        for suffix in suffixes
        if name + suffix not in EVENTS
    )
    assert not missing, missing


def test_services_do_not_rename_themselves_per_instance() -> None:
    """``<name>.run`` is derived from the class attribute; an instance override would escape the scan."""
    offenders = []
    for cls in service_classes():
        tree = ast.parse(inspect.getsource(cls))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr == "name"
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        offenders.append(f"{cls.__module__}.{cls.__qualname__}")
    assert not offenders, offenders


def test_plain_log_messages_with_event_names_are_catalogued() -> None:
    unknown = sorted(
        f"{where}: {name}" for name, where in plain_event_names().items() if name not in EVENTS
    )
    assert not unknown, unknown


def test_no_stale_catalogue_entries() -> None:
    stale = sorted(set(EVENTS) - emitted_names())
    assert not stale, (
        f"catalogued but emitted nowhere (removing one needs a CHANGELOG entry): {stale}"
    )


def test_every_event_is_documented_once_under_its_daemon() -> None:
    rows = documented_rows()
    undocumented = sorted(set(EVENTS) - set(rows))
    assert not undocumented, f"missing from {DOC.relative_to(REPO_ROOT)}: {undocumented}"
    uncatalogued = sorted(set(rows) - set(EVENTS))
    assert not uncatalogued, (
        f"documented but not in queue_engine/foundation/events.py: {uncatalogued}"
    )
    twice = sorted(name for name, cells in rows.items() if len(cells) > 1)
    assert not twice, f"documented in more than one row: {twice}"
    wrong = sorted(
        f"{name}: doc says {cells[0]!r}, catalogue says {daemon_of(name)!r}"
        for name, cells in rows.items()
        if cells[0] != daemon_of(name)
    )
    assert not wrong, wrong
