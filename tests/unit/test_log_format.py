"""The text log line: the fast paths of its fields and its time give what the slow ones gave."""

from __future__ import annotations

import logging

import pytest

from queue_engine.foundation.logs import TEXT_FORMAT, TextFormatter, format_fields, log_event

WHITESPACE = [chr(c) for c in range(0x3001) if chr(c).isspace()]
#: Unprintable but not whitespace: escaped (a raw NUL or ESC from a request never reaches a log).
UNPRINTABLE = ["\x00", "\x07", "\x1b", "\x7f", "\u200b", "\u00ad"]
#: Printable, not whitespace: written as they are.
OTHERS = ["é", "日本", "'", '"', "=", "-"]


@pytest.mark.parametrize("char", WHITESPACE + UNPRINTABLE + OTHERS, ids=ascii)
def test_a_field_is_quoted_exactly_when_it_holds_whitespace_or_an_unprintable(char: str) -> None:
    text = f"a{char}b"
    expected = repr(text) if char.isspace() or not char.isprintable() else text
    assert format_fields({"k": text}) == f"k={expected}"
    assert all(c.isprintable() for c in format_fields({"k": text}))


def test_fields_of_every_kind() -> None:
    assert format_fields({"a": "", "b": 1, "c": None, "d": 1.5, "e": "x y"}) == (
        "a='' b=1 c=None d=1.5 e='x y'"
    )


def _record(created: float) -> logging.LogRecord:
    record = logging.LogRecord("queue_engine.worker", logging.INFO, __file__, 1, "job.x", (), None)
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    return record


def test_text_formatter_writes_the_lines_logging_writes() -> None:
    fast, plain = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    # Same second twice, the next, a step back, and far apart.
    for created in (1_700_000_000.125, 1_700_000_000.999, 1_700_000_001.0, 1_700_000_000.5, 5.25):
        record = _record(created)
        assert fast.format(record) == plain.format(record)
    record = _record(1_700_000_000.125)
    assert fast.formatTime(record, "%H:%M") == plain.formatTime(record, "%H:%M")


def test_a_log_event_record_carries_its_line_as_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("queue_engine.test_log_format")
    with caplog.at_level(logging.INFO, logger=logger.name):
        log_event(logger, logging.INFO, "job.succeeded", job_id=7, note="100% %s done")
    (record,) = caplog.records
    line = "job.succeeded job_id=7 note='100% %s done'"
    # No %-formatting left to do: a percent sign in a value is logged as it is.
    assert record.msg == line and record.args == () and record.getMessage() == line
    assert record.event == "job.succeeded"  # type: ignore[attr-defined]
    assert record.funcName == "log_event"
