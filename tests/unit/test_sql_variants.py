"""Statement variants: one SQL file, lines tagged for the warm or cold claim."""

from __future__ import annotations

import re

import pytest

from queue_engine.foundation.sql.compiler import RawStatement, raw_statement, select_variant
from queue_engine.worker import store

TEXT = """SELECT 1
-- @warm begin
, 2
, 3
-- @warm end
LIMIT %(a)s - 1  --@warm
LIMIT %(a)s  --@cold
"""


def test_untagged_lines_are_in_every_variant_and_tagged_ones_in_theirs() -> None:
    assert select_variant(TEXT, "warm").splitlines() == [
        "SELECT 1",
        ", 2",
        ", 3",
        "LIMIT %(a)s - 1  --@warm",
    ]
    assert select_variant(TEXT, "cold").splitlines() == ["SELECT 1", "LIMIT %(a)s  --@cold"]
    assert select_variant(TEXT, None).splitlines() == ["SELECT 1"]


def test_a_line_tagged_with_two_tags_is_only_in_a_variant_with_both() -> None:
    text = "SELECT 1\n-- @warm begin\n, 2\n, 3 --@warm+handover\n-- @warm end\n, 4  --@handover"
    assert select_variant(text, ("warm", "handover")).splitlines() == [
        "SELECT 1",
        ", 2",
        ", 3 --@warm+handover",
        ", 4  --@handover",
    ]
    assert select_variant(text, "warm").splitlines() == ["SELECT 1", ", 2"]
    assert select_variant(text, ("cold", "handover")).splitlines() == [
        "SELECT 1",
        ", 4  --@handover",
    ]


def test_the_claim_variants_differ_only_by_the_warm_preference() -> None:
    cold = raw_statement("finish_and_claim_jobs", "queue_engine", "cold")
    warm = raw_statement("finish_and_claim_jobs", "queue_engine", "warm")
    assert "warm_key" not in cold.names and "affinity_wait_s" not in cold.names
    assert {"warm_key", "affinity_wait_s"} <= set(warm.names)
    assert "affinity_key =" not in cold.text and "affinity_key =" in warm.text
    for statement in (cold, warm):
        assert "--" not in statement.text and "%(" not in statement.text
        # Each parameter is numbered once, in order of first use.
        assert [f"${i}" in statement.text for i in range(1, len(statement.names) + 1)] == [
            True
        ] * len(statement.names)


def _named(statement: RawStatement) -> str:
    """The statement's text with each ``$n`` back to its parameter's name."""
    return re.sub(r"\$(\d+)", lambda m: statement.names[int(m.group(1)) - 1], statement.text)


@pytest.mark.parametrize("key", ["cold", "warm"])
def test_the_claim_only_variant_is_the_claim_without_the_finish(key: str) -> None:
    full = raw_statement("finish_and_claim_jobs", "queue_engine", key)
    only = raw_statement("finish_and_claim_jobs", "queue_engine", (key, "claimonly"))
    finish_params = {"outcomes", "jobs_channel"}
    assert finish_params <= set(full.names)
    assert not finish_params & set(only.names)
    assert "finished" in full.text and "finished" not in only.text
    assert only.text.startswith("WITH gate AS (")
    # The claim itself, every CTE from the gate to the claimed event, is the same text.
    full_text, only_text = _named(full), _named(only)
    start, end = "gate AS (", "claim_events AS ("
    claim = full_text[full_text.index(start) : full_text.index(end)]
    assert claim == only_text[only_text.index(start) : only_text.index(end)]
    assert only_text.rstrip().endswith("FROM allowed a WHERE a.n < a.picked")
    assert "UNION ALL UNION ALL" not in only_text


def test_blocks_nest_and_a_line_needs_every_block_around_it() -> None:
    text = (
        "SELECT 1\n-- @!solo begin\n, 2\n-- @one begin\n, 3\n, 4  --@!followups\n"
        "-- @one end\n, 5\n-- @!solo end\n, 6"
    )
    assert select_variant(text, "cold").splitlines() == ["SELECT 1", ", 2", ", 5", ", 6"]
    assert select_variant(text, ("cold", "one")).splitlines() == [
        "SELECT 1",
        ", 2",
        ", 3",
        ", 4  --@!followups",
        ", 5",
        ", 6",
    ]
    assert select_variant(text, ("one", "followups")).splitlines() == [
        "SELECT 1",
        ", 2",
        ", 3",
        ", 5",
        ", 6",
    ]
    assert select_variant(text, ("one", "solo")).splitlines() == ["SELECT 1", ", 6"]


@pytest.mark.parametrize(
    "text",
    ["-- @a begin\nx\n-- @b end", "-- @a begin\nx", "x\n-- @a end"],
    ids=["crossed", "never ended", "never begun"],
)
def test_unbalanced_blocks_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="block tag"):
        select_variant(text, "a")


@pytest.mark.parametrize(
    ("outcomes", "claim_limit", "warm", "tags"),
    [
        (1, 1, False, ("onefinish", "oneclaim")),  # a prefetch-1 worker at steady state
        (0, 1, False, ("claimonly", "oneclaim")),  # after an idle wait
        (1, 0, False, ("onefinish",)),  # a finish alone (stopping)
        (1, 1, True, ("onefinish",)),  # a warm key ranks its job against the queue's head
        (2, 2, False, ()),
        (100, 100, False, ()),
        (0, 0, False, ()),
    ],
)
def test_size_tags(outcomes: int, claim_limit: int, warm: bool, tags: tuple[str, ...]) -> None:
    assert store.size_tags(outcomes, claim_limit, warm=warm) == tags


def test_the_one_job_forms_leave_out_the_batch_parts() -> None:
    batch = raw_statement("finish_and_claim_jobs", "queue_engine", "cold").text
    one = raw_statement("finish_and_claim_jobs", "queue_engine", ("cold", "onefinish", "oneclaim"))
    assert "row_number()" in batch and "row_number()" not in one.text
    assert "pick AS (" in batch and "pick AS (" not in one.text
    assert "jsonb_to_recordset" in batch and "jsonb_to_recordset" not in one.text
    assert "jsonb_to_record(" in one.text
    # Same parameters: the worker builds one set for every form.
    assert set(one.names) == set(
        raw_statement("finish_and_claim_jobs", "queue_engine", "cold").names
    )
