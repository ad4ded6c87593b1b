"""Enqueue validation: every documented rule is enforced before anything is written.

Covers ``queue_engine.producer.validation`` (names, args, numeric ranges, run_at/delay,
keys, unknown ``enqueue_many`` options) and the ``operations`` helpers that
apply it: ``job_spec`` (registered task defaults), ``spec_from_item`` and
``enqueue_many_specs`` (errors name ``jobs[i]``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer import operations as ops
from queue_engine.producer.tasks import task
from queue_engine.producer.validation import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    ENQUEUE_OPTIONS,
    MAX_ARGS_BYTES,
    MAX_KEY_LENGTH,
    EnqueueOptions,
    JobSpec,
    build_spec,
    check_option_names,
    check_queue_name,
    check_task_name,
    encode_args,
)

# --- queue names -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["a", "A", "0", "default", "load.cbr", "etl:daily", "a-b_c.d:e", "9lives", "q" * 64],
)
def test_valid_queue_names_are_accepted(name: str) -> None:
    assert check_queue_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "q" * 65,
        "_leading_underscore",
        "-leading-dash",
        ".leading-dot",
        ":leading-colon",
        "has space",
        "slash/queue",
        "semi;colon",
        "quote'q",
        "émile",
        "abc\n",  # a trailing newline must not slip past the end anchor
        "q" * 64 + "\n",
        "\nabc",
    ],
)
def test_invalid_queue_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid queue name"):
        check_queue_name(name)


@pytest.mark.parametrize("value", [None, 1, 1.5, b"default", ["default"], {"q": 1}])
def test_non_string_queue_is_a_validation_error(value: object) -> None:
    with pytest.raises(ValidationError, match="invalid queue name"):
        check_queue_name(value)  # type: ignore[arg-type]


def test_queue_error_message_documents_the_rule() -> None:
    with pytest.raises(ValidationError) as info:
        check_queue_name("bad name")
    message = str(info.value)
    assert "'bad name'" in message
    assert "1-64" in message


# --- task names ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["a", "_private", "send_email", "etl.load:v2", "A-1", "t" * 128, "_" + "x" * 127]
)
def test_valid_task_names_are_accepted(name: str) -> None:
    assert check_task_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "t" * 129, "1starts_with_digit", "-dash", ".dot", ":colon", "has space", "a/b", "abc\n"],
)
def test_invalid_task_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid task name"):
        check_task_name(name)


@pytest.mark.parametrize("value", [None, 7, ["t"]])
def test_non_string_task_is_a_validation_error(value: object) -> None:
    with pytest.raises(ValidationError, match="invalid task name"):
        check_task_name(value)  # type: ignore[arg-type]


def test_build_spec_checks_the_task_name() -> None:
    with pytest.raises(ValidationError, match="invalid task name"):
        build_spec("9bad")


def test_task_error_message_documents_the_rule() -> None:
    with pytest.raises(ValidationError) as info:
        check_task_name("9x")
    assert "1-128" in str(info.value)


# --- args ------------------------------------------------------------------------


@pytest.mark.parametrize("args", [None, {}])
def test_missing_or_empty_args_encode_as_empty_object(args: object) -> None:
    assert encode_args(args) == "{}"


def test_args_round_trip_as_compact_json() -> None:
    args = {"n": 1, "s": "x", "l": [1, 2.5, None, True], "d": {"k": "v"}, "u": "é"}
    encoded = encode_args(args)
    assert json.loads(encoded) == args
    assert " " not in encoded


@pytest.mark.parametrize("args", [[1, 2], "text", 3, (1,), {1, 2}, b"{}"])
def test_args_must_be_a_dict(args: object) -> None:
    with pytest.raises(ValidationError, match="args must be a dict"):
        encode_args(args)


@pytest.mark.parametrize(
    "args",
    [
        {"when": datetime(2024, 1, 1, tzinfo=UTC)},
        {"s": {1, 2}},
        {"obj": object()},
        {"nan": math.nan},
        {"inf": math.inf},
        {(1, 2): "tuple key"},
    ],
)
def test_args_must_be_json_serialisable(args: dict[object, object]) -> None:
    with pytest.raises(ValidationError, match="not JSON-serialisable"):
        encode_args(args)


def test_args_size_limit_is_inclusive_of_one_mib() -> None:
    overhead = len(json.dumps({"x": ""}, separators=(",", ":")))
    at_limit = {"x": "a" * (MAX_ARGS_BYTES - overhead)}
    assert len(encode_args(at_limit).encode()) == MAX_ARGS_BYTES
    over = {"x": "a" * (MAX_ARGS_BYTES - overhead + 1)}
    with pytest.raises(ValidationError, match=f"limit is {MAX_ARGS_BYTES} bytes"):
        encode_args(over)


def test_args_size_is_measured_in_encoded_bytes_not_characters() -> None:
    # Each non-ASCII character is escaped to six bytes, so far fewer characters fit.
    chars = MAX_ARGS_BYTES // 6 + 10
    with pytest.raises(ValidationError, match="bytes as JSON"):
        encode_args({"x": "é" * chars})


def test_build_spec_applies_args_rules() -> None:
    with pytest.raises(ValidationError, match="args must be a dict"):
        build_spec("t", args=[1])  # type: ignore[arg-type]
    assert build_spec("t", args={"a": 1}).args_json == '{"a":1}'


# --- numeric ranges --------------------------------------------------------------


def test_without_a_registered_task_the_database_fills_what_is_unset() -> None:
    # The task's defaults live in the database (published by its workers):
    # the spec leaves the five options unset and names the task to look up.
    spec = build_spec("some.task")
    assert (spec.queue, spec.priority, spec.max_attempts) == (None, None, None)
    assert (spec.timeout_s, spec.lease_ttl_s) == (None, None)
    assert spec.defaults_of == "some.task"
    assert spec.params()["defaults_of"] == "some.task"
    assert spec.args_json == "{}"
    assert spec.run_at is None
    assert spec.delay_s is None
    for key in ("idempotency_key", "dedupe_key", "lock_key", "partition_key", "producer"):
        assert getattr(spec, key) is None
    # One option given leaves the others to the database.
    assert build_spec("some.task", queue="q").defaults_of == "some.task"


def test_all_five_options_given_leave_nothing_to_look_up() -> None:
    spec = build_spec(
        "some.task", queue="q", priority=3, max_attempts=2, timeout_s=10, lease_ttl_s=20
    )
    assert spec.defaults_of is None
    assert (spec.queue, spec.priority, spec.max_attempts, spec.timeout_s, spec.lease_ttl_s) == (
        "q",
        3,
        2,
        10,
        20,
    )


@dataclasses.dataclass(frozen=True)
class Declared:
    queue: str = DEFAULT_QUEUE
    priority: int = DEFAULT_PRIORITY
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    timeout_s: int | None = None
    lease_ttl_s: int | None = None


def test_a_declaration_in_this_process_fills_every_option_and_nothing_is_looked_up() -> None:
    declared = Declared(queue="email", priority=7, max_attempts=3, timeout_s=30)
    spec = build_spec("email.send", declared=declared)
    assert (spec.queue, spec.priority, spec.max_attempts, spec.timeout_s, spec.lease_ttl_s) == (
        "email",
        7,
        3,
        30,
        None,  # declared without a lease: the worker's, not the database's
    )
    assert spec.defaults_of is None
    # What the caller gives wins over the declaration.
    spec = build_spec("email.send", declared=declared, queue="urgent", max_attempts=9)
    assert (spec.queue, spec.priority, spec.max_attempts) == ("urgent", 7, 9)


@pytest.mark.parametrize("priority", [0, 1, 100, 999, 1000])
def test_priority_in_range_is_accepted(priority: int) -> None:
    assert build_spec("t", priority=priority).priority == priority


@pytest.mark.parametrize("priority", [-1, 1001, 10**6])
def test_priority_out_of_range_is_refused(priority: int) -> None:
    with pytest.raises(ValidationError, match="priority must be between 0 and 1000"):
        build_spec("t", priority=priority)


@pytest.mark.parametrize("priority", [True, False, 1.0, "5"])
def test_priority_must_be_an_integer(priority: object) -> None:
    with pytest.raises(ValidationError, match="priority must be an integer"):
        build_spec("t", priority=priority)  # type: ignore[arg-type]


@pytest.mark.parametrize("attempts", [1, 5, 1000])
def test_max_attempts_in_range_is_accepted(attempts: int) -> None:
    assert build_spec("t", max_attempts=attempts).max_attempts == attempts


@pytest.mark.parametrize("attempts", [0, -3, 1001])
def test_max_attempts_out_of_range_is_refused(attempts: int) -> None:
    with pytest.raises(ValidationError, match="max_attempts must be between 1 and 1000"):
        build_spec("t", max_attempts=attempts)


@pytest.mark.parametrize("attempts", [True, 2.0, "3"])
def test_max_attempts_must_be_an_integer(attempts: object) -> None:
    with pytest.raises(ValidationError, match="max_attempts must be an integer"):
        build_spec("t", max_attempts=attempts)  # type: ignore[arg-type]


def test_timeout_and_lease_ttl_ranges() -> None:
    spec = build_spec("t", timeout_s=1, lease_ttl_s=86400)
    assert (spec.timeout_s, spec.lease_ttl_s) == (1, 86400)
    with pytest.raises(ValidationError, match="timeout_s"):
        build_spec("t", timeout_s=0)
    with pytest.raises(ValidationError, match="timeout_s"):
        build_spec("t", timeout_s=7 * 24 * 3600 + 1)
    with pytest.raises(ValidationError, match="lease_ttl_s"):
        build_spec("t", lease_ttl_s=0)
    with pytest.raises(ValidationError, match="lease_ttl_s"):
        build_spec("t", lease_ttl_s=86401)


# --- run_at / delay --------------------------------------------------------------


def test_aware_run_at_is_kept() -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    spec = build_spec("t", run_at=when)
    assert spec.run_at == when
    assert spec.delay_s is None
    assert spec.params()["run_at"] == when


def test_naive_run_at_is_refused() -> None:
    with pytest.raises(ValidationError, match="timezone-aware"):
        build_spec("t", run_at=datetime(2030, 1, 1))  # noqa: DTZ001


@pytest.mark.parametrize("value", ["2030-01-01T00:00:00+00:00", 1_700_000_000, 1.5])
def test_run_at_must_be_a_datetime(value: object) -> None:
    with pytest.raises(ValidationError, match="run_at must be a timezone-aware datetime"):
        build_spec("t", run_at=value)  # type: ignore[arg-type]


def test_run_at_and_delay_are_exclusive() -> None:
    with pytest.raises(ValidationError, match="either run_at or delay"):
        build_spec("t", run_at=datetime.now(UTC), delay=5)
    with pytest.raises(ValidationError, match="either run_at or delay"):
        build_spec("t", run_at=datetime.now(UTC), delay=0)


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [(0, 0.0), (5, 5.0), (2.5, 2.5), (timedelta(minutes=2), 120.0), (timedelta(0), 0.0)],
)
def test_delay_is_normalised_to_seconds(delay: float | timedelta, seconds: float) -> None:
    spec = build_spec("t", delay=delay)
    assert spec.delay_s == seconds
    assert isinstance(spec.delay_s, float)
    assert spec.run_at is None


@pytest.mark.parametrize(
    "delay", [-1, -0.001, timedelta(seconds=-1), math.nan, math.inf, -math.inf]
)
def test_negative_or_non_finite_delay_is_refused(delay: float | timedelta) -> None:
    with pytest.raises(ValidationError, match="finite number of seconds >= 0"):
        build_spec("t", delay=delay)


@pytest.mark.parametrize("delay", [True, "5", [5]])
def test_delay_must_be_a_number_or_timedelta(delay: object) -> None:
    with pytest.raises(ValidationError, match="delay must be seconds or a timedelta"):
        build_spec("t", delay=delay)  # type: ignore[arg-type]


# --- keys ------------------------------------------------------------------------

KEY_OPTIONS = (
    "idempotency_key",
    "dedupe_key",
    "lock_key",
    "partition_key",
    "producer",
    "affinity_key",
)


@pytest.mark.parametrize("option", KEY_OPTIONS)
def test_key_at_max_length_is_accepted(option: str) -> None:
    value = "k" * MAX_KEY_LENGTH
    assert getattr(build_spec("t", **{option: value}), option) == value


@pytest.mark.parametrize("option", KEY_OPTIONS)
@pytest.mark.parametrize("value", ["k" * (MAX_KEY_LENGTH + 1), "", 5, b"bytes"])
def test_bad_keys_are_refused(option: str, value: object) -> None:
    with pytest.raises(
        ValidationError, match=f"{option} must be a non-empty string of at most 255"
    ):
        build_spec("t", **{option: value})  # type: ignore[arg-type]


#: Every enqueue option but run_at, each with a value no other field has.
EVERY_OPTION: dict[str, Any] = {
    "queue": "q",
    "args": {"a": 1},
    "priority": 3,
    "delay": 1,
    "max_attempts": 2,
    "timeout_s": 9,
    "lease_ttl_s": 30,
    "idempotency_key": "i",
    "dedupe_key": "d",
    "lock_key": "l",
    "partition_key": "p",
    "producer": "me",
    "affinity_key": "warm",
    "concurrency_key": "c",
    "concurrency_limit": 4,
    "weight": 2,
}


def test_spec_params_bind_every_enqueue_parameter() -> None:
    spec = build_spec("t", **EVERY_OPTION)
    params = spec.params()
    assert params == {
        "task": "t",
        "queue": "q",
        "args": '{"a":1}',
        "priority": 3,
        "run_at": None,
        "delay_s": 1.0,
        "max_attempts": 2,
        "timeout_s": 9,
        "lease_ttl_s": 30,
        "idempotency_key": "i",
        "dedupe_key": "d",
        "lock_key": "l",
        "partition_key": "p",
        "producer": "me",
        "affinity_key": "warm",
        "concurrency_key": "c",
        "concurrency_limit": 4,
        "weight": 2,
        "defaults_of": None,
    }


# --- one list of the options (EnqueueOptions) ---------------------------------------


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "enqueueing.md"


def test_the_guides_option_table_lists_every_option() -> None:
    """The first table of docs/guides/enqueueing.md: every option, and ``conn``."""
    text = GUIDE.read_text()
    table = text[text.index("| option | type | default | meaning |") :].split("\n\n")[0]
    rows = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert rows == [*ENQUEUE_OPTIONS, "conn"]
    assert set(EVERY_OPTION) | {"run_at"} == set(EnqueueOptions.__annotations__)


def test_job_spec_has_a_field_for_each_option_in_the_statements_terms() -> None:
    """JobSpec, with_args_json and params() name the fields one by one (for speed): held here."""
    in_statement_terms = {"args": "args_json", "delay": "delay_s"}
    expected = [
        "task",
        *(in_statement_terms.get(name, name) for name in EnqueueOptions.__annotations__),
        "defaults_of",
    ]
    assert [f.name for f in dataclasses.fields(JobSpec)] == expected
    params = build_spec("t", **EVERY_OPTION).params()
    assert list(params) == ["args" if name == "args_json" else name for name in expected], (
        "params() binds every field, args by its parameter's name"
    )


def test_an_unknown_option_is_a_type_error_that_suggests_the_known_one() -> None:
    with pytest.raises(
        TypeError, match=r"unexpected keyword argument 'prority', did you mean 'priority'\?"
    ):
        build_spec("t", prority=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'zzzz'$"):
        ops.job_spec("t", zzzz=None)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("options", "plain"),
    [
        ({}, True),
        ({"queue": "q", "args": {"a": 1}}, True),
        ({"queue": None, "priority": None, "lock_key": None}, True),
        ({"queue": "q", "priority": 1}, False),
        ({"idempotency_key": "k"}, False),
        ({"prority": None}, False),  # unknown: left to the full validation, which refuses it
    ],
)
def test_a_single_enqueue_is_plain_when_it_gives_only_queue_and_args(
    options: dict[str, Any], plain: bool
) -> None:
    assert ops.is_plain(options) is plain  # type: ignore[arg-type]


# --- registered task defaults (operations.job_spec) -------------------------------


def test_job_spec_uses_registered_task_defaults() -> None:
    @task("defaults.registered", queue="etl.load", max_attempts=9, timeout_s=600)
    def handler(args: dict[str, object]) -> None:
        return None

    spec = ops.job_spec("defaults.registered")
    assert spec.queue == "etl.load"
    assert spec.max_attempts == 9
    assert spec.timeout_s == 600


def test_explicit_options_override_registered_defaults() -> None:
    @task("defaults.override", queue="etl.load", max_attempts=9, timeout_s=600)
    def handler(args: dict[str, object]) -> None:
        return None

    spec = ops.job_spec("defaults.override", queue="other", max_attempts=2, timeout_s=5)
    assert (spec.queue, spec.max_attempts, spec.timeout_s) == ("other", 2, 5)


def test_an_unregistered_task_leaves_its_defaults_to_the_database() -> None:
    spec = ops.job_spec("defaults.unknown")
    assert (spec.queue, spec.max_attempts, spec.timeout_s) == (None, None, None)
    assert spec.defaults_of == "defaults.unknown"


def test_registered_defaults_without_timeout_leave_timeout_unset() -> None:
    @task("defaults.no_timeout", queue="q1")
    def handler(args: dict[str, object]) -> None:
        return None

    spec = ops.job_spec("defaults.no_timeout")
    assert (spec.queue, spec.max_attempts, spec.timeout_s) == ("q1", 5, None)


# --- enqueue_many items ----------------------------------------------------------


def test_unknown_option_suggests_the_closest_known_one() -> None:
    with pytest.raises(ValidationError) as info:
        check_option_names({"task": "t", "priorty": 1}, where="jobs[0]")
    message = str(info.value)
    assert message.startswith("jobs[0]: unknown option 'priorty'")
    assert "did you mean 'priority'?" in message


def test_unknown_option_without_a_close_match_lists_known_options() -> None:
    with pytest.raises(ValidationError) as info:
        check_option_names({"task": "t", "zzzzzz": 1}, where="jobs[3]")
    message = str(info.value)
    assert "jobs[3]: unknown option 'zzzzzz'" in message
    assert "did you mean" not in message
    for option in ENQUEUE_OPTIONS:
        assert option in message


def test_non_string_option_name_is_a_validation_error() -> None:
    with pytest.raises(ValidationError, match=r"jobs\[0\]: unknown option 1"):
        check_option_names({"task": "t", 1: 2}, where="jobs[0]")


def test_item_without_task_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"jobs\[2\]: 'task' is required"):
        check_option_names({"queue": "q"}, where="jobs[2]")


def test_conn_is_not_an_enqueue_many_item_option() -> None:
    with pytest.raises(ValidationError, match="unknown option 'conn'"):
        ops.spec_from_item({"task": "t", "conn": None}, 0)


@pytest.mark.parametrize(
    ("item", "fragment"),
    [
        ({"task": "t", "priority": 5000}, "priority must be between 0 and 1000"),
        ({"task": "t", "queue": "bad queue"}, "invalid queue name"),
        ({"task": "t", "queue": ["unhashable"]}, "invalid queue name"),
        ({"task": "9bad"}, "invalid task name"),
        ({"task": "t", "args": [1]}, "args must be a dict"),
        ({"task": "t", "delay": -1}, "delay must be a finite"),
        ({"task": "t", "run_at": datetime(2030, 1, 1)}, "timezone-aware"),  # noqa: DTZ001
        ({"task": "t", "dedupe_key": ""}, "dedupe_key must be"),
        ({"task": "t", "idmepotency_key": "x"}, "did you mean 'idempotency_key'"),
    ],
)
def test_item_errors_name_the_item_position(item: dict[str, object], fragment: str) -> None:
    jobs: list[object] = [{"task": "ok"}] * 4 + [item] + [{"task": "ok"}]
    with pytest.raises(ValidationError) as info:
        ops.enqueue_many_specs(jobs)
    message = str(info.value)
    assert message.startswith("jobs[4]: ")
    assert fragment in message


@pytest.mark.parametrize("item", ["task", 5, None, ["task", "t"]])
def test_item_must_be_a_dict(item: object) -> None:
    with pytest.raises(ValidationError, match=r"jobs\[1\] must be a dict of enqueue options"):
        ops.enqueue_many_specs([{"task": "ok"}, item])


@pytest.mark.parametrize("jobs", [{"task": "t"}, "task", b"task"])
def test_enqueue_many_refuses_a_non_list(jobs: object) -> None:
    with pytest.raises(ValidationError, match="takes a list of dicts"):
        ops.enqueue_many_specs(jobs)  # type: ignore[arg-type]


def test_enqueue_many_specs_keeps_order_and_accepts_any_iterable() -> None:
    specs = ops.enqueue_many_specs({"task": "t", "args": {"i": i}} for i in range(5))
    assert [json.loads(s.args_json)["i"] for s in specs] == [0, 1, 2, 3, 4]
    assert ops.enqueue_many_specs([]) == []


def test_enqueue_many_specs_apply_registered_defaults() -> None:
    @task("defaults.many", queue="bulk", max_attempts=3)
    def handler(args: dict[str, object]) -> None:
        return None

    specs = ops.enqueue_many_specs([{"task": "defaults.many"}, {"task": "other"}])
    assert (specs[0].queue, specs[0].max_attempts, specs[0].defaults_of) == ("bulk", 3, None)
    assert (specs[1].queue, specs[1].max_attempts, specs[1].defaults_of) == (None, None, "other")


def test_with_args_json_keeps_every_other_field() -> None:
    spec = build_spec("t", **EVERY_OPTION)
    assert spec.with_args_json('{"b":2}') == dataclasses.replace(spec, args_json='{"b":2}')
    scheduled = build_spec("t", run_at=datetime(2030, 1, 1, tzinfo=UTC))
    assert scheduled.with_args_json("{}") == dataclasses.replace(scheduled, args_json="{}")


BULK_ITEMS: list[dict[str, object]] = [
    {"task": "t", "queue": "q", "args": {"i": 0}},
    {"task": "t", "queue": "q", "args": {"i": 1}},
    {"task": "t", "queue": "q"},
    {"queue": "q", "task": "t", "args": {"i": 2}},
    {"task": "t", "queue": "r", "args": {"i": 3}},
    {"task": "t", "queue": "q", "priority": 3, "args": {"i": 4}},
    {"task": "t", "queue": "q", "priority": 3},
    {"task": "t", "queue": "q", "delay": 1, "args": {"i": 5}},
    {"task": "t", "queue": "q", "delay": 1.0},
    {"task": "t", "queue": "q", "delay": timedelta(seconds=1)},
    {"task": "t", "queue": "q", "lock_key": "k", "args": {"i": 6}},
    {"task": "u", "queue": "q", "args": {"i": 7}},
    {"task": "t", "queue": "q", "args": {"i": 8}},
]


def test_enqueue_many_specs_equal_validating_each_item_alone() -> None:
    assert ops.enqueue_many_specs(BULK_ITEMS) == [
        ops.spec_from_item(item, index) for index, item in enumerate(BULK_ITEMS)
    ]


def test_items_repeating_options_get_their_own_args() -> None:
    specs = ops.enqueue_many_specs([{"task": "t", "args": {"i": i}} for i in range(3)])
    assert [s.args_json for s in specs] == ['{"i":0}', '{"i":1}', '{"i":2}']
    assert len({id(s) for s in specs}) == 3


@pytest.mark.parametrize(
    ("second", "fragment"),
    [
        ({"task": "t", "priority": True}, "priority must be an integer"),
        ({"task": "t", "priority": 1.0}, "priority must be an integer"),
        ({"task": "t", "priority": 1, "args": [1]}, "args must be a dict"),
        ({"task": "t", "priority": 1, "args": {"a": "\u0000"}}, "args contain a NUL"),
        ({"task": "t", "priority": 1, "args": {"a": object()}}, "not JSON-serialisable"),
    ],
)
def test_an_item_repeating_valid_options_is_still_checked(
    second: dict[str, object], fragment: str
) -> None:
    """Equal options of another type are validated anew; args always are."""
    with pytest.raises(ValidationError) as info:
        ops.enqueue_many_specs([{"task": "t", "priority": 1}, second])
    assert str(info.value).startswith("jobs[1]: ")
    assert fragment in str(info.value)


def test_bulk_statement_picks_plain_or_keyed_sql() -> None:
    plain = ops.enqueue_many_specs([{"task": "t"}, {"task": "t", "lock_key": "l"}])
    keyed = ops.enqueue_many_specs([{"task": "t"}, {"task": "t", "dedupe_key": "d"}])
    assert not ops.has_keys(plain)
    assert ops.has_keys(keyed)
    plain_stmt = ops.enqueue_many_statement("queue_engine", plain)
    keyed_stmt = ops.enqueue_many_statement("queue_engine", keyed)
    assert "idempotency_key" not in plain_stmt.params
    assert keyed_stmt.params["dedupe_key"] == [None, "d"]
    # An all-NULL column is sent as a single NULL array.
    assert plain_stmt.params["producer"] is None
    assert plain_stmt.params["lock_key"] == [None, "l"]
    assert keyed_stmt.params["args"] == ["{}", "{}"]


def test_plain_bulk_sends_a_column_shared_by_every_row_once() -> None:
    specs = ops.enqueue_many_specs(
        [{"task": "t", "queue": "q"}, {"task": "t", "queue": "q", "args": {"i": 1}}]
    )
    params = ops.enqueue_many_statement("queue_engine", specs).params
    assert params["n"] == 2
    assert (params["task"], params["task_all"]) == (None, "t")
    assert (params["queue"], params["queue_all"]) == (None, "q")
    assert (params["args"], params["args_all"]) == (["{}", '{"i":1}'], None)
    assert (params["producer"], params["producer_all"]) == (None, None)


# --- list / ids ------------------------------------------------------------------


@pytest.mark.parametrize("job_id", [0, -1, True, "1", 1.0, None])
def test_job_ids_must_be_positive_integers(job_id: object) -> None:
    with pytest.raises(ValidationError, match="job id must be a positive integer"):
        ops.get_statement("queue_engine", job_id)  # type: ignore[arg-type]


def test_list_statement_validates_filters() -> None:
    with pytest.raises(ValidationError, match="unknown status 'done'"):
        ops.list_statement("queue_engine", queue=None, status="done", task=None, limit=10)
    with pytest.raises(ValidationError, match="invalid queue name"):
        ops.list_statement("queue_engine", queue="bad q", status=None, task=None, limit=10)
    for limit in (0, 10_001, True):
        with pytest.raises(ValidationError, match="limit must be an integer"):
            ops.list_statement("queue_engine", queue=None, status=None, task=None, limit=limit)
    stmt = ops.list_statement("queue_engine", queue="q", status="failed", task="t", limit=7)
    assert stmt.params == {
        "queue": "q",
        "status": "failed",
        "task": "t",
        "limit": 7,
        "older_than_s": None,
    }
    for age in (-0.5, float("nan"), float("inf"), False, "2h"):
        with pytest.raises(ValidationError, match="older_than_s must be"):
            ops.list_statement(
                "queue_engine", queue=None, status=None, task=None, limit=1, older_than_s=age
            )
    aged = ops.list_statement(
        "queue_engine", queue=None, status=None, task=None, limit=1, older_than_s=90
    )
    assert aged.params["older_than_s"] == 90.0


# --- NUL characters (Postgres text and jsonb cannot hold them) -----------------------


@pytest.mark.parametrize(
    ("args", "where"),
    [
        ({"a": "x\u0000y"}, "in args['a']"),
        ({"x\u0000y": 1}, "in the key 'x\\x00y' of args"),
        ({"a": {"b": [1, "ok", "\u0000"]}}, "in args['a']['b'][2]"),
        ({"a": [{"k\u0000": None}]}, "in the key 'k\\x00' of args['a'][0]"),
        ({"a": ("t", "\u0000")}, "in args['a'][1]"),
    ],
)
def test_args_with_a_nul_character_are_refused_naming_where(
    args: dict[str, object], where: str
) -> None:
    with pytest.raises(ValidationError) as info:
        encode_args(args)
    message = str(info.value)
    assert "NUL character" in message
    assert where in message
    assert "\n" not in message and "\x00" not in message


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    # The text \u0000 (a backslash, then "u0000") is fine: JSON writes it as \\u0000.
    args = {"path": "C:\\u0000", "k\\u0000": "v"}
    assert json.loads(encode_args(args)) == args


def test_build_spec_refuses_a_nul_in_args_and_in_keys() -> None:
    with pytest.raises(ValidationError, match="NUL character"):
        build_spec("t", args={"a": "x\u0000y"})
    for option in ("idempotency_key", "dedupe_key", "lock_key", "partition_key", "producer"):
        with pytest.raises(ValidationError, match=f"{option} contains a NUL character"):
            build_spec("t", **{option: "k\u0000"})  # type: ignore[arg-type]


def test_enqueue_many_names_the_item_with_a_nul() -> None:
    items = [{"task": "t"}, {"task": "t", "args": {"a": {"b": "\u0000"}}}]
    with pytest.raises(
        ValidationError, match=r"^jobs\[1\]: args contain a NUL .*args\['a'\]\['b'\]"
    ):
        ops.enqueue_many_specs(items)
