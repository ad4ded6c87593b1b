"""No absolute path of one particular machine anywhere in the repository.

A path such as ``/tmp/qe-pg-_lv6y_sk`` or a home folder's in a doc,
a bench's usage line or a default works only on the machine it was copied from, and
says nothing a reader elsewhere can use. Every text file git would commit (tracked, or
new and not ignored) is scanned for the shapes such paths take:

- a home folder: ``/root/...``, ``/home/<user>``, ``/Users/<user>`` (macOS),
  ``C:\\Users\\<user>`` (Windows);
- the work tree of the machine this project was built on (``WORK_TREE`` below, a
  top-level ``work`` folder; written here in pieces, so that this file holds none);
- a temporary folder made for one run: pytest's (``pytest-of-<user>``), macOS's
  (``/private/var/folders``, ``/var/folders``), and a ``/tmp/`` path with a folder or
  file named by ``tempfile`` (a random 8-character suffix: ``/tmp/tmpk2j4x9ab``,
  ``/tmp/qe-pg-_lv6y_sk``) or by a run's timestamp (``.../20261127-073641.json``).

A path only counts where one starts: not inside a URL or a relative path
(a URL's path, a relative path, a path under ``~``). Paths that mean the same on
every machine are none of these shapes, so they need no allow-list: ``/etc/queue-engine``,
``/var/lib/...``, ``/run/...``, ``/usr/bin/chromium``, and a ``/tmp/`` path with a chosen
name (``--dest /tmp/qe-harness``). A chosen name that happens to end in eight letters
(``/tmp/my-pipeline``) is taken for a random one: rename it. The only file allowed to hold
these shapes is this one, which names them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Files that may hold machine paths, and why. Keep it this short.
ALLOWED = {
    "tests/unit/test_no_machine_paths.py": "names the shapes it looks for, with samples",
}

#: The top-level folder of the machine this project was built on, joined at run time.
WORK_TREE = "/" + "work/"
#: Where an absolute path starts: not after a word, a dot, a slash or ``~``.
_START = r"(?<![\w.~/\\])"
#: A ``/tmp/`` folder or file that ``tempfile`` named (``tmp`` or any prefix ending in
#: ``-``, ``_`` or ``.``, then its 8 random characters), or a run's timestamp.
_RUN_SEGMENT = r"(?:(?:tmp|[\w.-]*[-_.])[a-z0-9_]{8}|[\w.-]*\d{8}[-_T]?\d{4,6}[\w.-]*)"

MACHINE_PATH = re.compile(
    "(?:"
    + "|".join(
        [
            _START + r"/root/",
            _START + r"/home/[\w.-]+",
            _START + r"/Users/[\w.-]+",
            r"(?<![\w])[A-Za-z]:\\Users\\",
            _START + re.escape(WORK_TREE),
            r"pytest-of-",
            _START + r"(?:/private)?/var/folders/",
            _START + r"/tmp/(?:[^\s/'\"`()<>,;]+/)*" + _RUN_SEGMENT + r"(?![\w-])",
        ]
    )
    + r")[^\s'\"`()<>\[\],;]*"  # the rest of the path, for the report
)


def _files_git_would_commit() -> list[str]:
    """Tracked files and new ones that are not ignored, relative to the repository."""
    if not (REPO_ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: the scan reads the files git lists")
    listed = subprocess.run(
        [
            "git",
            "-C",
            str(REPO_ROOT),
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ],
        capture_output=True,
        check=True,
    ).stdout
    return sorted({name for name in listed.decode().split("\0") if name})


def _text(path: Path) -> str | None:
    """The file's text, or None for a binary file (a NUL byte, or not UTF-8)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def machine_paths(text: str) -> list[str]:
    """Each line of ``text`` that holds a machine path, as ``line N: the path``."""
    return [
        f"line {number}: {match.group(0)}"
        for number, line in enumerate(text.splitlines(), start=1)
        for match in MACHINE_PATH.finditer(line)
    ]


@pytest.mark.parametrize(
    "line",
    [
        f"python bench/job_cost.py --build base={WORK_TREE}wt/base/.venv/bin/queue-claim-worker",
        f"results `{WORK_TREE}tmp/enqbench/results/20261124-023404.json`",
        "database: /tmp/qe-pg-_lv6y_sk:5432/postgres (schema queue_engine)",
        "database: /tmp/qe-pg-ldyxgzpz:5432/postgres",
        "kept in /tmp/tmpk2j4x9ab/data",
        "python bench/harness_cpu.py /tmp/qe-harness/results/20261127-073641.json",
        "E   FileNotFoundError: /tmp/pytest-of-ada/pytest-3/test_x0/log",
        "cd /root/queue-engine && pytest",
        "EnvironmentFile=-/home/ada/queue-engine.env",
        "see /home/ada/src/queue-engine",
        "/Users/ada/Library/Caches/queue-engine",
        "/private/var/folders/x7/abc/T/qe",
        r"C:\Users\ada\queue-engine",
    ],
)
def test_a_machine_path_is_found(line: str) -> None:
    assert machine_paths(line), line


@pytest.mark.parametrize(
    "line",
    [
        "EnvironmentFile=-/etc/queue-engine/queue-engine.env",
        "StateDirectory: /var/lib/queue-engine",
        "NOTIFY_SOCKET=/run/systemd/notify",
        "Environment=CHROME=/usr/bin/chromium",
        "python bench/shared_harness.py --dest /tmp/qe-harness",
        "callgrind_annotate --inclusive=yes /tmp/fc.callgrind",
        "postgresql:///x?host=/tmp/a b",
        f"https://github.com/ada{WORK_TREE}blob/main/README.md",
        f"cd ..{WORK_TREE}queue-engine; ls ~{WORK_TREE}",
        "the `host` is a socket folder such as /var/run/postgresql",
    ],
)
def test_a_generic_path_is_not(line: str) -> None:
    assert not machine_paths(line), line


def test_no_file_in_the_repository_holds_a_machine_path() -> None:
    found = []
    for name in _files_git_would_commit():
        path = REPO_ROOT / name
        if name in ALLOWED or not path.is_file():
            continue
        text = _text(path)
        if text is not None:
            found += [f"{name} {where}" for where in machine_paths(text)]
    assert not found, "paths of one machine (see this test's docstring):\n" + "\n".join(found)
