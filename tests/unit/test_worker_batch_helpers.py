"""The prefetching worker's per-batch helpers: the ids of a batch log line, the args decoder."""

from __future__ import annotations

import json

import pytest

from queue_engine.worker.flush import id_ranges
from queue_engine.worker.store import json_loads


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        ([], ""),
        ([5], "5"),
        ([4, 5, 6], "4-6"),
        ([9, 7, 10, 11, 12], "7,9-12"),
        ([3, 1, 2, 8, 20, 21], "1-3,8,20-21"),
    ],
)
def test_id_ranges_names_every_id_as_sorted_runs(ids: list[int], text: str) -> None:
    assert id_ranges(ids) == text


def test_json_loads_decodes_as_json_loads_and_gives_a_fresh_empty_dict() -> None:
    for value in ({"a": [1, 2.5, None, "é"]}, [], "x", 3, {"nested": {"k": "\u2603"}}):
        data = json.dumps(value, ensure_ascii=False).encode()
        assert json_loads(data) == json.loads(data)
        assert json_loads(data.decode()) == value
    first, second = json_loads(b"{}"), json_loads(b"{}")
    assert first == {} and first is not second  # a handler may change its args
