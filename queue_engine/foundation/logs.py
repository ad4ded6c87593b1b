"""Logging: log events, their formats (text or JSON lines), secrets masked.

:func:`log_event` makes a record with a stable event name (``job.succeeded``)
and snake_case fields; the text format prints it as ``event key=value ...``
and the JSON format as top-level keys, so the same record is grep-able by a
human and parseable by a log pipeline. Job arguments may hold credentials:
:func:`mask_secrets` replaces the value of any key that looks secret before
arguments reach a log line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from queue_engine.foundation import settings

#: A key containing any of these (case-insensitive) has its value logged as ``***``.
SECRET_KEY_PARTS = ("password", "passwd", "token", "secret", "key", "authorization")
MASK = "***"
LOG_FORMATS = settings.LOG_FORMAT.choices
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def is_secret_key(key: object) -> bool:
    """True when a dict key names something that must not be logged."""
    lowered = str(key).lower()
    return any(part in lowered for part in SECRET_KEY_PARTS)


def mask_secrets(value: Any, depth: int = 0) -> Any:
    """Return a copy of ``value`` with the values of secret-looking keys replaced by ``***``."""
    if depth > 20:
        return MASK
    if isinstance(value, dict):
        return {
            k: (MASK if is_secret_key(k) else mask_secrets(v, depth + 1)) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_secrets(v, depth + 1) for v in value]
    return value


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT`, with the time's text made once per second.

    The worker logs a line for every job it finishes, thousands a second, and
    ``Formatter.formatTime`` converts and formats the same second again for
    each (``time.localtime`` and ``strftime``). The line is unchanged:
    ``YYYY-MM-DD HH:MM:SS,mmm`` in local time.
    """

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: int | None = None
        self._stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """The record's time as ``Formatter.formatTime`` writes it without ``datefmt``."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        # Handlers format under their lock: one thread at a time per formatter.
        second = int(record.created)
        if second != self._second:
            self._stamp = time.strftime(self.default_time_format, self.converter(record.created))
            self._second = second
        if self.default_msec_format:
            return self.default_msec_format % (self._stamp, record.msecs)
        return self._stamp


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``event``, then the fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record; a record without an event name gets ``event: "log"``."""
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": getattr(record, "event", "log"),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                out.setdefault(key, value)
        else:
            out["message"] = record.getMessage()
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def setup_logging(log_format: str = "text", level: str = "INFO") -> None:
    """Send the root logger to stderr in the chosen format (replacing earlier handlers)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))


def format_fields(fields: dict[str, Any]) -> str:
    """Render ``key=value`` pairs in a stable order, quoting values with spaces.

    A value with whitespace or any unprintable character (a NUL, an escape
    sequence, a newline sent in a request path) is written as its ``repr``:
    a log line never carries a raw control character from its input, which
    could forge a line or a terminal sequence.
    """
    parts = []
    for key, value in fields.items():
        text = str(value)
        # The worker formats a line like this for every job it finishes. A
        # printable text without a space has no whitespace at all (every other
        # whitespace character is unprintable): two C scans, no regex, for
        # the ids, names and numbers that make up most fields.
        if not text or not text.isprintable() or " " in text:
            text = repr(text)
        parts.append(f"{key}={text}")
    return " ".join(parts)


#: Job ids named in one log line; the rest are counted (``17,18,+40``).
LOGGED_IDS_MAX = 20


def logged_ids(ids: Iterable[int]) -> str:
    """Ids for a log field: the first :data:`LOGGED_IDS_MAX`, then how many more."""
    ids = list(ids)
    shown = ",".join(str(i) for i in ids[:LOGGED_IDS_MAX])
    return shown + (f",+{len(ids) - LOGGED_IDS_MAX}" if len(ids) > LOGGED_IDS_MAX else "")


def log_event(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log ``event key=value ...``; the event name is stable so operators can grep and alert on it.

    The fields are also attached to the record (``event`` and ``fields``) for a
    structured formatter.

    ``event`` must be a name of :data:`queue_engine.foundation.events.EVENTS` (a public
    contract for log pipelines). It is deliberately *not* checked here: an
    unknown name is logged like any other, because a typo must never cost a log
    line or raise in a daemon. ``tests/unit/test_log_events.py`` finds every
    name the code can emit, literal or computed, and fails on an unknown one.
    """
    if logger.isEnabledFor(level):
        text = f"{event} {format_fields(fields)}" if fields else event
        # logger.log() would walk the stack to find its caller, which is always
        # this line; the worker logs every job it finishes, so the record is
        # made here, naming this function, and handed to the logger as it is.
        record = logger.makeRecord(
            logger.name,
            level,
            __file__,
            _LOG_LINE,
            text,
            (),
            None,
            "log_event",
            {"event": event, "fields": fields},
        )
        logger.handle(record)


#: The line a record of :func:`log_event` names (what ``logger.log`` found there).
_LOG_LINE = log_event.__code__.co_firstlineno
