"""What a bench prints: Markdown tables on stdout, progress lines on stderr.

Tables are Markdown so that a run's output can go into bench/README.md or the
run log as it is; progress (each round's figures as they come) goes to stderr,
so ``> out.md`` keeps only the tables.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Print a Markdown table: ``header``, then one line per row (cells as ``str`` gives them)."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |", flush=True)


def log(message: str) -> None:
    """A progress line on stderr, with the UTC time."""
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)
