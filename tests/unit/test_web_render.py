"""The dashboard's filters: what a progress document draws, how a job's status reads.

Pure functions of :mod:`queue_engine.web.pages.render`; the pages that use
them are checked in tests/integration/test_dashboard_job_states.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from queue_engine.web.pages.render import progress_of


@pytest.mark.parametrize(
    ("document", "fraction", "label"),
    [
        ({"done": 3, "total": 12}, 0.25, "3 of 12 · 25%"),  # queue-ctl demo
        ({"step": 3, "of": 12}, 0.25, "3 of 12 · 25%"),  # the worker guide
        ({"done": 3, "of": 12}, 0.25, "3 of 12 · 25%"),
        ({"current": 1500, "total": 6000}, 0.25, "1 500 of 6 000 · 25%"),
        ({"percent": 40}, 0.4, "40%"),
        ({"fraction": 0.5}, 0.5, "50%"),
        (0.75, 0.75, "75%"),
        (60, 0.6, "60%"),
        ({"step": 14, "of": 12}, 1.0, "14 of 12 · 100%"),  # past the end: a full bar
    ],
)
def test_progress_shapes_draw_a_bar(document: Any, fraction: float, label: str) -> None:
    drawn = progress_of(document)
    assert drawn is not None
    assert drawn["fraction"] == pytest.approx(fraction)
    assert drawn["label"] == label


@pytest.mark.parametrize(
    "document",
    [{"rows": 10}, {"step": 3}, {"done": 3, "total": 0}, {"done": True, "total": 2}, "loading"],
)
def test_other_documents_are_shown_as_json_without_a_bar(document: Any) -> None:
    drawn = progress_of(document)
    assert drawn is not None and drawn["fraction"] is None and drawn["label"] == ""


def test_the_json_and_the_message_are_kept_beside_the_bar() -> None:
    drawn = progress_of({"of": 4, "step": 1, "stage": "parsing"})
    assert drawn is not None
    assert drawn["text"] == '{"of": 4, "stage": "parsing", "step": 1}'
    assert drawn["note"] == "parsing"
    assert progress_of(None) is None
