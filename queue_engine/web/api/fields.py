"""The HTTP API's constrained values: one definition gives both the check and the document.

Each type here is what a parameter or a body field accepts, written once:
its JSON Schema (pattern, length, range) goes into the OpenAPI document, and
its check runs on every request. Where the engine has a check of its own
(:func:`~queue_engine.producer.validation.check_queue_name`, the id range, ...), the
type runs that very check and documents that very pattern, so the document,
the HTTP API, ``queue-ctl`` and the Python client cannot drift apart; a
refusal names the field and carries the engine's sentence.

Patterns are written so that JSON Schema (ECMA-262) and Python read them the
same way: ASCII character classes, anchored, checked with ``fullmatch``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, Field, Strict, WithJsonSchema

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.schedules import NAME_PATTERN as SCHEDULE_NAME_PATTERN
from queue_engine.producer.validation import (
    ID_RANGE,
    MAX_KEY_LENGTH,
    NO_NUL_PATTERN,
    QUEUE_PATTERN,
    TASK_PATTERN,
    check_queue_name,
    check_task_name,
)
from queue_engine.producer.workflows.spec import NAME_PATTERN as WORKFLOW_NAME_PATTERN
from queue_engine.producer.workflows.spec import NODE_PATTERN

ID_MIN, ID_MAX = ID_RANGE
#: Hosts and worker ids over HTTP: visible ASCII, no space (the engine also
#: takes other printable characters; hosts and the ids built from them are
#: ASCII in practice, and a pattern of ASCII reads the same in every regex
#: dialect a generated client may use).
TOKEN_PATTERN = re.compile(r"^[!-~]{1,255}$")
#: Name of the OpenAPI component every JSON value field refers to.
JSON_VALUE_REF = "#/components/schemas/JsonValue"
#: Where a schema means "a JSON value": pydantic refuses a ``$ref`` it did not
#: make, so the fields carry this mark and :func:`with_json_values` turns it
#: into the reference once the document is built.
JSON_VALUE_MARK = "x-json-value"


def _string_schema(pattern: re.Pattern[str], description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern.pattern, "description": description}


def _fullmatch(pattern: re.Pattern[str], what: str, rule: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValidationError(f"invalid {what} {value!r}: use {rule}")
        return value

    return AfterValidator(check)


def _no_nul_key(value: str) -> str:
    if not 1 <= len(value) <= MAX_KEY_LENGTH:
        raise ValidationError(f"use 1-{MAX_KEY_LENGTH} characters")
    if "\x00" in value:
        raise ValidationError("contains a NUL character (\\x00), which Postgres cannot store")
    return value


def _json_number(value: Any) -> Any:
    # JSON has one number type: 5.0 is an integer to JSON Schema, "5" and true are not.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError("must be a JSON number")
    return value


JSON_NUMBER = BeforeValidator(_json_number)

#: A job id in a body: from 1. No maximum here: JSON numbers past 2^53 are
#: rounded by most readers, so a maximum of 2^63-1 would read differently in
#: each; an id past it names no job and is reported as such.
BodyId = Annotated[int, Field(ge=ID_MIN), JSON_NUMBER]

QUEUE_RULE = "1-64 letters, digits and _ . : -, starting with a letter or digit"
QueueName = Annotated[
    str,
    AfterValidator(check_queue_name),
    WithJsonSchema(_string_schema(QUEUE_PATTERN, f"a queue name: {QUEUE_RULE}")),
]
TASK_RULE = "1-128 letters, digits and _ . : -, starting with a letter or _"
TaskName = Annotated[
    str,
    AfterValidator(check_task_name),
    WithJsonSchema(_string_schema(TASK_PATTERN, f"a task name: {TASK_RULE}")),
]
NAME_RULE = "1-128 letters, digits and _ . : -, starting with a letter, digit or _"
WorkflowName = Annotated[
    str,
    _fullmatch(WORKFLOW_NAME_PATTERN, "workflow name", NAME_RULE),
    WithJsonSchema(_string_schema(WORKFLOW_NAME_PATTERN, f"a workflow name: {NAME_RULE}")),
]
NodeName = Annotated[
    str,
    _fullmatch(NODE_PATTERN, "node name", NAME_RULE),
    WithJsonSchema(_string_schema(NODE_PATTERN, f"a node name: {NAME_RULE}")),
]
ScheduleName = Annotated[
    str,
    _fullmatch(SCHEDULE_NAME_PATTERN, "schedule name", NAME_RULE),
    WithJsonSchema(_string_schema(SCHEDULE_NAME_PATTERN, f"a schedule name: {NAME_RULE}")),
]
PRINTABLE_RULE = "1-255 visible ASCII characters, no space"
HostName = Annotated[
    str,
    _fullmatch(TOKEN_PATTERN, "host", PRINTABLE_RULE),
    WithJsonSchema(_string_schema(TOKEN_PATTERN, f"a host name: {PRINTABLE_RULE}")),
]
WorkerId = Annotated[
    str,
    _fullmatch(TOKEN_PATTERN, "worker id", PRINTABLE_RULE),
    WithJsonSchema(_string_schema(TOKEN_PATTERN, f"a worker id: {PRINTABLE_RULE}")),
]
#: An idempotency, dedupe, lock, partition or affinity key, or a producer name.
Key = Annotated[
    str,
    AfterValidator(_no_nul_key),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_KEY_LENGTH,
            "pattern": NO_NUL_PATTERN,
            "description": f"1-{MAX_KEY_LENGTH} characters, no NUL",
        }
    ),
]
#: RFC 3339's date-time, which the document's ``format: date-time`` names.
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _time_text(value: Any) -> Any:
    # pydantic would also read a number (or "0.5") as a Unix time: the document says RFC 3339.
    if not isinstance(value, datetime) and not (isinstance(value, str) and RFC3339.match(value)):
        raise ValidationError("must be an RFC 3339 time with an offset, e.g. 2030-01-31T08:00:00Z")
    return value


#: A timezone-aware time (RFC 3339 text with an offset).
Time = Annotated[AwareDatetime, BeforeValidator(_time_text)]


#: Body numbers as JSON has them: 5 or 5.0 for an integer, never "5" or true
#: (pydantic's lax mode would take those; the document says number). Put it
#: after a ``Field``'s bounds in ``Annotated``, or they leave the document:
#: :data:`JSON_NUMBER`, defined above.
#: A body boolean: true or false only (not 0, 1 or "yes").
Bool = Annotated[bool, Strict()]
#: A JSON object whose strings and keys hold no NUL (as a job's ``args``); the
#: engine checks it (and its 1 MiB cap) when it encodes it.
JsonObject = Annotated[
    dict[str, Any],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL_PATTERN},
            "additionalProperties": {JSON_VALUE_MARK: True},
        }
    ),
]
#: Any JSON value whose strings and keys hold no NUL (an input node's value).
JsonValue = Annotated[Any, WithJsonSchema({JSON_VALUE_MARK: True})]

#: The ``JsonValue`` component (added to the document by :mod:`queue_engine.web.openapi`).
JSON_VALUE_SCHEMA: dict[str, Any] = {
    "description": "any JSON value; no string and no key may contain a NUL character "
    "(Postgres jsonb cannot store \\u0000)",
    "anyOf": [
        {"type": "string", "pattern": NO_NUL_PATTERN},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"$ref": JSON_VALUE_REF}},
        {
            "type": "object",
            "propertyNames": {"pattern": NO_NUL_PATTERN},
            "additionalProperties": {"$ref": JSON_VALUE_REF},
        },
    ],
}


def with_json_values(node: Any) -> Any:
    """``node`` (a schema, or a whole document) with every JSON value mark made a reference."""
    if isinstance(node, dict):
        if node.get(JSON_VALUE_MARK) is True:
            return {"$ref": JSON_VALUE_REF}
        return {key: with_json_values(value) for key, value in node.items()}
    if isinstance(node, list):
        return [with_json_values(item) for item in node]
    return node


def exactly_one(*alternatives: dict[str, Any]) -> dict[str, Any]:
    """A ``oneOf`` of object shapes (a rule between fields, such as "ids or filter")."""
    return {"oneOf": list(alternatives)}


def given(*fields: str, types: dict[str, str] | None = None) -> dict[str, Any]:
    """The shape "these fields are present and not null" (their JSON types from ``types``)."""
    kinds = types or {}
    return {
        "required": list(fields),
        "properties": {
            f: {"type": kinds[f]} if f in kinds else {"not": {"type": "null"}} for f in fields
        },
    }


def absent(*fields: str) -> dict[str, Any]:
    """The shape "these fields are absent or null"."""
    return {"properties": {f: {"type": "null"} for f in fields}}


__all__ = [
    "ID_MAX",
    "ID_MIN",
    "JSON_NUMBER",
    "JSON_VALUE_SCHEMA",
    "BodyId",
    "Bool",
    "HostName",
    "JsonObject",
    "JsonValue",
    "Key",
    "NodeName",
    "QueueName",
    "ScheduleName",
    "TaskName",
    "Time",
    "WorkerId",
    "WorkflowName",
    "absent",
    "exactly_one",
    "given",
    "with_json_values",
]
