"""The statement compiler: a named query's variant as the ``$n`` text the server is sent.

Two steps, both on text and both done once per statement, schema and variant
(the result is cached):

- :func:`select_variant` keeps the lines of one variant of a file that holds
  several, side by side, marked with line tags (``--@warm``, ``-- @handover
  begin`` ... ``-- @handover end``). ``finish_and_claim_jobs.sql`` is written
  this way: one file for the worker's every finish-and-claim statement.
- :func:`compile_statement` drops the comments and the runs of whitespace and
  turns each ``%(name)s`` into a ``$n``, for a raw cursor or libpq's prepared
  statements: psycopg then converts nothing on each execute.

Which variant to send, and sending it, are the worker store's
(:mod:`queue_engine.worker.store`). docs/internals/sql.md explains the tags and
the other ways a statement's text is composed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from queue_engine.foundation import sql as queries


@dataclass(frozen=True, slots=True)
class RawStatement:
    """A named query as sent to the server: ``$n`` placeholders and the parameter order."""

    text: str
    names: tuple[str, ...]


_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
_BLOCK_TAG = re.compile(r"--\s*@(!?\w+)\s+(begin|end)\s*$")
_LINE_TAG = re.compile(r"--@(!?\w+(?:\+!?\w+)*)\s*$")


def select_variant(text: str, variant: str | tuple[str, ...] | None) -> str:
    """Keep the lines of ``text`` that belong to ``variant`` (a tag, or several).

    A line ending in ``--@name`` and the lines between ``-- @name begin`` and
    ``-- @name end`` belong to variant ``name`` only; other lines to every
    variant. One file then holds every variant of a statement, side by side.
    Tags combine: ``("cold", "followups")`` keeps the lines of either tag. A
    line ending in ``--@a+b`` belongs to a variant with both tags only (a line
    of one block that only matters when another block is there too). A tag
    ``!name`` (``-- @!name begin``, ``--@a+!name``) is the opposite: the lines
    belong to every variant *without* ``name``. Blocks nest, and a line is
    kept only when every block around it and its own tag agree: the one-job
    claim's lines (``oneclaim``) sit inside the claim's ``!solo`` block.
    """
    tags = (variant,) if isinstance(variant, str) else (variant or ())
    kept: list[str] = []
    blocks: list[str] = []
    for line in text.splitlines():
        marker = _BLOCK_TAG.fullmatch(line.strip())
        if marker is not None:
            if marker.group(2) == "begin":
                blocks.append(marker.group(1))
            elif not blocks or blocks.pop() != marker.group(1):
                raise ValueError(f"unbalanced block tag: {line.strip()}")
            continue
        tagged = _LINE_TAG.search(line)
        needed = blocks + (tagged.group(1).split("+") if tagged is not None else [])
        if all(_has(tags, tag) for tag in needed):
            kept.append(line)
    if blocks:
        raise ValueError(f"block tag never ended: @{blocks[-1]}")
    return "\n".join(kept)


def _has(tags: tuple[str, ...], tag: str) -> bool:
    """Whether a variant with ``tags`` keeps lines tagged ``tag`` (``!name``: without name)."""
    return tag[1:] not in tags if tag.startswith("!") else tag in tags


@cache
def raw_statement(
    name: str, schema: str, variant: str | tuple[str, ...] | None = None
) -> RawStatement:
    """The named query's ``variant``, without comments and runs of whitespace, with ``$n``.

    Each distinct ``%(name)s`` becomes one ``$n`` (a name used twice is sent once).
    """
    return compile_statement(select_variant(queries.query(name, schema), variant), name)


def compile_statement(text: str, name: str) -> RawStatement:
    """``text`` without comments and runs of whitespace, its ``%(name)s`` as ``$n``.

    ``name`` only names the query in an error. The benches compile candidate
    texts of a statement with it (bench/job_cost.py ``--sql-ab``).
    """
    lines = (line.split("--", 1)[0].strip() for line in text.splitlines())
    compact = " ".join(line for line in lines if line)
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    text = _PLACEHOLDER.sub(number, compact)
    if "%" in text:  # a literal % would need the %% escape of the psycopg form
        raise ValueError(f"query {name} has a % that is not a placeholder")
    return RawStatement(text, tuple(names))
