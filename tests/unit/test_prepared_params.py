"""The worker's prepared statement sends its parameters as text: only the types it has."""

from __future__ import annotations

import pytest

from queue_engine.worker.prepared import text_params


def test_values_are_written_as_postgres_reads_them() -> None:
    assert text_params(["wörker", 7, -1, 2.5, 30.0, None, ""], "utf-8") == [
        "wörker".encode(),
        b"7",
        b"-1",
        b"2.5",
        b"30.0",
        None,
        b"",
    ]


@pytest.mark.parametrize("value", [True, b"raw", [1], {"a": 1}, 1.5j])
def test_any_other_type_is_refused(value: object) -> None:
    # A bool is an int to isinstance, but would be sent as 'True': refused, not guessed.
    with pytest.raises(TypeError, match="must be str, int, float or None"):
        text_params([value], "utf-8")
