"""bench/: every script is in bench/README.md's table, and every citation of one is true.

A newcomer reads "The scripts" in bench/README.md to learn what each bench
measures, so the table names every script of ``bench/`` and nothing that is
gone. The docs, the code's comments and the CHANGELOG cite benches for their
figures (``bench/idle_fleet.py``); a script removed since lives on in git
history, and a citation of it says where (``bench/heap_layout.py``, in git
history at 2be1230), so a reader can still run what measured the figure.
Migrations are left out (their up scripts are checksummed, their comments stay
as written) and so is the run log, ``bench/runs/``, which records what was run
when.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH = REPO_ROOT / "bench"

#: A cited bench script (``bench/NAME.py``, ``../bench/NAME.py``; not the shared
#: harness's ``../shared/bench/...`` nor a placeholder such as ``bench/SCRIPT.py``),
#: and where a removed one is: "in git history at <commit>", maybe across a line break.
CITATION = re.compile(
    r"(?<![\w-])(?<!shared/)bench/(?P<path>[a-z0-9_/]+\.py)(?:[^`\n]*`)?"
    r"(?:,?\s+in\s+git\s+history\s+at\s+(?P<commit>[0-9a-f]{7,40}))?"
)
#: Where citations are read: the docs, the code, the tests and the CHANGELOG.
CITING = ("README.md", "CHANGELOG.md", "docs", "queue_engine", "tests", "bench")
#: Not read: the run log (a record of its days), and this file (it names samples).
NOT_CITING = ("bench/runs/", "tests/unit/test_bench_catalogue.py")


def scripts_table(readme: str) -> list[str]:
    """The files named in the first column of the README's "The scripts" table."""
    section = readme.split("## The scripts", 1)[1].split("\n## ", 1)[0]
    names: list[str] = []
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith("| script"):
            first = line.split(" | ", 1)[0]
            names += re.findall(r"`([\w/]+\.py)`", first)
    return names


def citations(text: str) -> list[tuple[str, str | None]]:
    """(script path under bench/, the commit that holds it or None) of each citation."""
    return [(m["path"], m["commit"]) for m in CITATION.finditer(text)]


def held_at(commit: str, path: str) -> bool:
    """Whether git history has ``bench/<path>`` at ``commit``."""
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{commit}:bench/{path}"],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _citing_files() -> list[Path]:
    files: list[Path] = []
    for place in CITING:
        root = REPO_ROOT / place
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in candidates:
            name = path.relative_to(REPO_ROOT).as_posix()
            if path.suffix in {".py", ".md", ".sql"} and not name.startswith(NOT_CITING):
                files.append(path)
    return files


def test_the_table_names_every_script_and_only_scripts_that_exist() -> None:
    named = scripts_table((BENCH / "README.md").read_text())
    scripts = {p.name for p in BENCH.glob("*.py")}
    assert not scripts - set(named), f"bench/README.md has no row for {scripts - set(named)}"
    assert not set(named) - scripts, f"bench/README.md names what is gone: {set(named) - scripts}"
    assert len(named) == len(set(named)), "a script named twice"


def test_every_citation_names_a_script_here_or_one_in_git_history() -> None:
    if not (REPO_ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: removed scripts are checked in its history")
    wrong = []
    for path in _citing_files():
        for script, commit in citations(path.read_text()):
            if (BENCH / script).exists():
                continue
            where = path.relative_to(REPO_ROOT)
            if commit is None:
                wrong.append(f"{where}: bench/{script} is gone; say 'in git history at COMMIT'")
            elif not held_at(commit, script):
                wrong.append(f"{where}: bench/{script} is not in git history at {commit}")
    assert not wrong, "\n".join(wrong)


def test_the_table_is_read_from_its_first_column() -> None:
    readme = """# bench/

## The scripts

| script | what it measures (`other.py` is not a script of the row) |
|---|---|
| `a.py`, `b.py` | the first two; `c.py` is named in passing |
| `d.py` (`d_db.py`, `sql/`) | one |

## Reproduce
| `e.py` | not in the table |
"""
    assert scripts_table(readme) == ["a.py", "b.py", "d.py", "d_db.py"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("measured with `bench/idle_fleet.py`.", [("idle_fleet.py", None)]),
        ("(bench/job_cost.py ``--sql-ab``)", [("job_cost.py", None)]),
        ("`bench/gone.py`, in git history at 2be1230: x", [("gone.py", "2be1230")]),
        ("`bench/gone.py --ab`, in git history at 2be1230)", [("gone.py", "2be1230")]),
        ("bench/gone.py in git history at abcdef0", [("gone.py", "abcdef0")]),
        ("`bench/gone.py` (see git history)", [("gone.py", None)]),
        ("`bench/gone.py`, in git\n  history at 2be1230", [("gone.py", "2be1230")]),
        ("[x](../bench/prune_bench.py)", [("prune_bench.py", None)]),
        ("../shared/bench/adapters/queue_engine.py, python bench/SCRIPT.py", []),
        ("bench/runs/2026-11-27-log.md and bench/README.md", []),
    ],
)
def test_a_citation_and_its_commit_are_read(text: str, found: list[tuple[str, str | None]]) -> None:
    assert citations(text) == found
