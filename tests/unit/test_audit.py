"""The audit of controls' pure parts: ``--since``, the filters, the actor, the documented vocabulary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.operator.audit import (
    CONTROL_PATTERN,
    CONTROLS,
    VIAS,
    Actor,
    check_filters,
    local_actor,
    parse_since,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90m", NOW - timedelta(minutes=90)),
        ("2d", NOW - timedelta(days=2)),
        ("3600", NOW - timedelta(hours=1)),
        ("2026-11-28T09:00:00Z", datetime(2026, 11, 28, 9, tzinfo=UTC)),
        ("2026-11-28T09:00:00+01:00", datetime(2026, 11, 28, 8, tzinfo=UTC)),
        ("2026-11-28 09:00", datetime(2026, 11, 28, 9, tzinfo=UTC)),  # no offset: UTC
    ],
)
def test_since_is_a_duration_back_from_now_or_a_time(text: str, expected: datetime) -> None:
    assert parse_since(text, NOW) == expected


@pytest.mark.parametrize(
    "text", ["", "yesterday", "2 days", "-5m", "99999999999999w", "2026-13-01"]
)
def test_a_bad_since_is_one_sentence(text: str) -> None:
    with pytest.raises(ValidationError, match=r"^invalid --since .*: use a duration"):
        parse_since(text, NOW)


@pytest.mark.parametrize(
    ("control", "target", "limit"),
    [
        ("Pause", None, 10),
        ("pause;", None, 10),
        (None, "", 10),
        (None, None, 0),
        (None, None, 1001),
    ],
)
def test_filters_no_row_could_match_are_refused(
    control: str | None, target: str | None, limit: int
) -> None:
    with pytest.raises(ValidationError):
        check_filters(control, target, limit)


def test_every_control_fits_the_tables_check_and_is_documented() -> None:
    schema_page = (DOCS / "reference" / "schema.md").read_text()
    section = schema_page[schema_page.index("## `control_events`") :]
    for control in CONTROLS:
        assert CONTROL_PATTERN.match(control)
        assert f"`{control}`" in section, control
    for via in VIAS:
        assert f"`{via}`" in section, via


def test_an_actor_has_a_known_face_and_a_bounded_name() -> None:
    with pytest.raises(ValueError, match="via must be one of"):
        Actor("ada", "telnet")
    with pytest.raises(ValidationError):
        Actor("", "cli")
    assert local_actor("cli", {"QUEUE_ENGINE_ACTOR": "deploy-bot"}) == Actor("deploy-bot", "cli")
    with pytest.raises(ConfigError, match="QUEUE_ENGINE_ACTOR"):
        local_actor("cli", {"QUEUE_ENGINE_ACTOR": "x" * 256})
