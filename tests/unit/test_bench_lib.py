"""bench/lib: the builds an A/B names, the order of its rounds, and percentiles.

An A/B alternates the builds in ABBA order so that a drift of a shared
machine's load hits both; a build is named by its interpreter or one of its
console scripts, and a mix-up (the worker run from this build when the other
was meant) would compare a build with itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from lib.builds import Build, alternated
from lib.timing import pct


def test_rounds_alternate_abba() -> None:
    order = [alternated(["a", "b", "c"], r) for r in range(4)]
    assert order == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"], ["c", "b", "a"]]


@pytest.mark.parametrize(
    ("spec", "label", "python", "worker"),
    [
        ("base=../base/.venv/bin/python", "base", "../base/.venv/bin/python", "../base/.venv/bin"),
        (
            "../base/.venv/bin/queue-claim-worker",
            "other",
            "../base/.venv/bin/python",
            "../base/.venv/bin",
        ),
        ("old=/opt/qe/bin/python3.11", "old", "/opt/qe/bin/python3.11", "/opt/qe/bin"),
    ],
)
def test_a_build_is_named_by_any_file_of_its_venv(
    spec: str, label: str, python: str, worker: str
) -> None:
    build = Build.parse(spec)
    assert (build.label, build.python) == (label, python)
    assert build.script("queue-claim-worker") == f"{worker}/queue-claim-worker"


def test_dot_is_this_build() -> None:
    build = Build.parse("new=.")
    assert build == Build.this("new")
    assert build.script("queue-ctl") == str(Path(sys.executable).parent / "queue-ctl")


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 11)]
    assert [pct(values, p) for p in (10, 50, 90, 99, 100)] == [1.0, 5.0, 9.0, 10.0, 10.0]
    assert pct([], 50) != pct([], 50)  # NaN: no values, no percentile
