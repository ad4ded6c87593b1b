"""Commit subjects are at most 72 characters, the detail in the body.

Two guards. ``scripts/hooks/commit-msg`` refuses such a commit as it is made
(installed once per clone with ``git config core.hooksPath scripts/hooks``,
see docs/contributing.md); here its rule is checked on messages, with no git
needed. And every commit that came after :data:`BASE` is checked in this
checkout's history, so a commit made without the hook is caught by the suite.
The commits before :data:`BASE` keep their long subjects: history that has
landed is not rewritten.

Merge commits are left out of the history check: the integrator writes them
(the hook checks them too where it is installed). A checkout without the
history (no git, a shallow or partial clone that stops after :data:`BASE`,
a branch from before it) skips the check with the reason.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HOOK = REPO_ROOT / "scripts" / "hooks" / "commit-msg"
#: main's head when the rule came (issue 34): the commits after it are held to it.
BASE = "2be1230e6d87aabd304bae23044daaddc52ecee1"
MAX_SUBJECT = 72


def load_hook() -> ModuleType:
    """The hook as a module (a script without ``.py``, run by git as a program)."""
    loader = importlib.machinery.SourceFileLoader("commit_msg_hook", str(HOOK))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("message", "subject"),
    [
        ("Add the thing\n\nWhy it is added.\n", "Add the thing"),
        ("Add the thing\n", "Add the thing"),
        # git joins the lines of the first paragraph into the subject
        ("Add the thing\nand its test\n\nbody\n", "Add the thing and its test"),
        ("\n\nAdd the thing\n\nbody\n", "Add the thing"),
        # the editor's template: git strips comment lines after the hook ran
        ("# Please enter the commit message\nAdd the thing\n# comment\n", "Add the thing"),
        # git commit -v: what stands under the scissors line is not the message
        (
            "Add the thing\n# ------------------------ >8 ------------------------\ndiff\n",
            "Add the thing",
        ),
        ("# only comments\n", ""),
    ],
)
def test_the_subject_is_what_git_log_shows(message: str, subject: str) -> None:
    assert load_hook().subject_of(message) == subject


def test_the_hook_takes_72_characters_and_refuses_73(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = load_hook()
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text(
        "x" * 72 + "\n\n" + "a body line may be as long as it needs to be " * 3 + "\n"
    )
    assert hook.main([str(message)]) == 0
    assert capsys.readouterr().err == ""
    message.write_text("x" * 73 + "\n\nbody\n")
    assert hook.main([str(message)]) == 1
    err = capsys.readouterr().err
    assert "the subject is 73 characters, at most 72" in err
    assert str(message) in err  # where the refused message waits to be used again


def test_the_hook_lets_through_what_is_squashed_before_it_lands(tmp_path: Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("fixup! " + "x" * 70 + "\n")
    assert load_hook().main([str(message)]) == 0


def test_the_hook_is_a_program_git_can_run() -> None:
    assert HOOK.read_text().startswith("#!/usr/bin/env python3\n")
    assert os.access(HOOK, os.X_OK), f"{HOOK.relative_to(REPO_ROOT)} must be executable"


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
    )


def test_every_commit_since_the_rule_has_a_subject_of_at_most_72_characters() -> None:
    if not (REPO_ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: no history to check")
    if git("cat-file", "-e", f"{BASE}^{{commit}}").returncode != 0:
        pytest.skip(f"the history does not reach {BASE[:12]} (a shallow or partial clone)")
    descends = git("merge-base", "--is-ancestor", BASE, "HEAD")
    if descends.returncode != 0:
        pytest.skip(f"HEAD does not descend from {BASE[:12]}: {descends.stderr.strip() or 'older'}")
    log = git("log", "--no-merges", "--format=%h%x09%s", f"{BASE}..HEAD")
    assert log.returncode == 0, log.stderr
    too_long = [
        f"{commit}: {len(subject)} characters: {subject}"
        for commit, _, subject in (line.partition("\t") for line in log.stdout.splitlines())
        if len(subject) > MAX_SUBJECT
    ]
    assert too_long == [], "subjects over 72 characters (reword them before they land):\n" + (
        "\n".join(too_long)
    )
