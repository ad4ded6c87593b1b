"""The migration guides' settings maps agree with ``foundation/legacy_settings.py``.

``docs/migrating/dataloader.md`` and ``docs/migrating/pqrun.md`` each carry a
settings map written for a reader (old name, what replaced it, a note), while
``queue-ctl migrate-settings`` and the start-up notices read the same facts from
:mod:`queue_engine.foundation.legacy_settings`. The two were written apart and
had drifted (a statement timeout in the DSN where the command says there is
none, ``default_stale_after`` as the lease where it is the watchdog's budget).
These tests hold each guide's table to the mapping: every variable of the
system has a row; a name with a counterpart names it, with its default; a name
without one says so.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from queue_engine.foundation import legacy_settings as legacy
from queue_engine.foundation import settings as table

REPO = Path(__file__).resolve().parents[2]
GUIDES = {
    legacy.DATALOADER: "docs/migrating/dataloader.md",
    legacy.PQRUN: "docs/migrating/pqrun.md",
}
_CODE = re.compile(r"`([^`]+)`")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What a row with no counterpart starts its second cell with.
_NONE = re.compile(r"(none|no |not )")


def settings_rows(page: str) -> list[tuple[str, str]]:
    """(old cell, new cell) of each row of the first table under "## Settings map"."""
    text = (REPO / page).read_text()
    section = text.split("\n## Settings map\n", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, str]] = []
    in_table = False
    for line in section.splitlines():
        if line.startswith("|"):
            if in_table and not line.startswith("|---"):
                cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
                rows.append((cells[0], cells[1]))
            in_table = True
        elif in_table:
            break
    return rows


def names_in(cell: str, known: set[str]) -> set[str]:
    """The old names a first cell mentions: words inside its code spans that ``known`` has."""
    return {w for span in _CODE.findall(cell) for w in _WORD.findall(span) if w in known}


@pytest.mark.parametrize("system", list(GUIDES))
def test_every_old_variable_has_a_row(system: str) -> None:
    known = {o.name for o in legacy.entries(system)}
    shown = set().union(*(names_in(old, known) for old, _ in settings_rows(GUIDES[system])))
    variables = {o.name for o in legacy.entries(system) if o.form == "env"}
    assert variables - shown == set(), GUIDES[system]


@pytest.mark.parametrize("system", list(GUIDES))
def test_each_row_says_what_the_mapping_says(system: str) -> None:
    entries = {o.name: o for o in legacy.entries(system)}
    checked = 0
    for old_cell, new_cell in settings_rows(GUIDES[system]):
        for name in names_in(old_cell, set(entries)):
            old = entries[name]
            checked += 1
            if old.new is None:
                if old.translate != "workers":
                    assert _NONE.match(new_cell), (name, new_cell)
                continue
            assert re.search(rf"`{old.new}[`=]", new_cell), (name, old.new, new_cell)
            if old.new.startswith(table.PREFIX):
                default = table.by_env(old.new).shown_default.strip("`")
                given = re.search(rf"`{old.new}` \(([^)]*)\)", new_cell)
                if given is not None and default != "unset":  # unset: the paren explains
                    value = given.group(1).replace("*", "").strip("`")
                    assert re.match(rf"{re.escape(default)}\b", value), (name, value, default)
    assert checked >= 10


def test_the_reader_parses_a_table() -> None:
    """The reader finds the table the page has (it would pass vacuously on none)."""
    rows = settings_rows(GUIDES[legacy.DATALOADER])
    assert ("`DL_HEARTBEAT_SEC` (10)", "`QUEUE_ENGINE_HEARTBEAT_S` (10)") in rows


def test_a_setting_that_names_an_old_variable_is_named_back() -> None:
    """A setting made for an old name (WORKERS_BESIDE for pqrun's WORKER_ENABLED) is in its entry.

    Else ``migrate-settings`` and the start-up notice say "no counterpart"
    where the reference page names one, as they did for ``WORKER_ENABLED``.
    """
    missing = [
        (setting.env, old.name)
        for setting in table.SETTINGS.values()
        for old in legacy.OLD_NAMES
        if old.form == "env"
        and re.search(rf"\b{old.name}\b", setting.doc)
        and setting.env != old.new
        and setting.env not in old.note
    ]
    assert missing == []
