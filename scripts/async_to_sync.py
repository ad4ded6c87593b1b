#!/usr/bin/env python3
"""Generate the synchronous twin of each asyncio module: ``python scripts/async_to_sync.py``.

The producer API has two faces, ``AsyncClient`` and ``Client``, and the
testing kit's assertions two as well; each pair does the same thing, one
with ``await``. The asyncio module is the source and the synchronous one is
written from it, as psycopg writes its sync classes from its async ones
(psycopg's ``tools/async_to_sync.py``): dropping ``await`` is mechanical,
knowing where to add it is not. ``tests/unit/test_generated_twins.py`` fails
when a generated module differs from what this script would write.

How a source module is turned into its twin:

- ``await`` and the ``async`` of ``async def``/``with``/``for`` are dropped;
- each name of :data:`NAMES` is swapped for its twin, in code and, as a whole
  word, in docstrings and comments (``AsyncClient`` -> ``Client``); each of
  :data:`MODULES` in code only (so a docstring can name both files);
- an ``if True:  # ASYNC`` block keeps its ``else`` side, dedented (or
  nothing, without an ``else``): where the two faces differ in more than
  ``await`` (what a module imports, how a pool is opened). ``if True`` costs
  nothing at run time: the compiler drops the test and the ``else``;
- a twin's own phrases (:attr:`Twin.prose`) are swapped in its docstrings,
  and each must be found, so that an edited docstring cannot silently lose
  one;
- the result gets a header saying where it comes from, and is sorted and
  formatted by ruff (the ``ruff`` of the project's ``test`` extra) as
  ``ruff check --select I --fix`` and ``ruff format`` would.

Usage::

    python scripts/async_to_sync.py           # write every stale twin
    python scripts/async_to_sync.py --check   # only say which are stale (exit 1)
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python scripts/async_to_sync.py"

#: Async name -> its synchronous twin, in code and in prose.
NAMES = {
    "AbstractAsyncContextManager": "AbstractContextManager",
    "AsyncClient": "Client",
    "AsyncConnection": "Connection",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncCursorKeepingConnection": "CursorKeepingConnection",
    "AsyncIterator": "Iterator",
    "AsyncTarget": "Target",
    "KeptAsyncConnectionPool": "KeptConnectionPool",
    "_GivenAsyncConnection": "_GivenConnection",
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "assert_enqueued_async": "assert_enqueued",
    "async_tuple_cursor": "tuple_cursor",
    "asynccontextmanager": "contextmanager",
    "connect_async": "connect",
    "enqueued_jobs_async": "enqueued_jobs",
    "refute_enqueued_async": "refute_enqueued",
}
#: Async module -> its twin, in code only (a docstring names the files as they are).
MODULES = {"async_client": "client"}


@dataclass(frozen=True)
class Twin:
    """An asyncio module and the synchronous module generated from it."""

    source: str
    target: str
    #: Phrases of its docstrings and comments that differ beyond the names.
    prose: tuple[tuple[str, str], ...] = ()


TWINS = (
    Twin(
        "queue_engine/producer/async_client.py",
        "queue_engine/producer/client.py",
        prose=(
            ("for asyncio code", "for synchronous code"),
            ("from asyncio code", "from synchronous code"),
            ("``async with``", "``with``"),
            ('"queue-engine-async-client"', '"queue-engine-client"'),
        ),
    ),
    Twin(
        "queue_engine/testing/async_assertions.py",
        "queue_engine/testing/assertions.py",
        prose=(("for asyncio code", "for synchronous code"),),
    ),
)


class GenerationError(Exception):
    """The source breaks a convention of the generator (the message says which)."""


def header(twin: Twin) -> str:
    """The comment that opens a generated module."""
    name = Path(twin.source).name
    return (
        f"# Generated from {name} by scripts/async_to_sync.py: do not edit by hand.\n"
        f"# Edit {name}, then run `{COMMAND}` (docs/contributing.md).\n"
    )


def transform(source: str, twin: Twin) -> str:
    """The synchronous text of ``source``, before ruff sorts and formats it."""
    text = resolve_async_blocks(source)
    text = swap_tokens(text)
    for old, new in twin.prose:
        if old not in text:
            raise GenerationError(
                f"{twin.source}: the phrase {old!r} of its twin's prose is not in it any more: "
                f"update Twin.prose in scripts/async_to_sync.py"
            )
        text = text.replace(old, new)
    return header(twin) + text


def _async_blocks(tree: ast.AST, lines: list[str]) -> list[ast.If]:
    blocks = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Constant)
            and node.test.value is True
            and lines[node.lineno - 1].rstrip().endswith("# ASYNC")
        ):
            blocks.append(node)
    return blocks


def resolve_async_blocks(source: str) -> str:
    """Replace each ``if True:  # ASYNC`` block by its ``else`` side, dedented, or by nothing."""
    while True:
        lines = source.splitlines(keepends=True)
        blocks = _async_blocks(ast.parse(source), lines)
        if not blocks:
            return source
        # The last block first: earlier line numbers stay valid.
        block = max(blocks, key=lambda b: b.lineno)
        start, end = block.lineno - 1, block.end_lineno or block.lineno
        kept: list[str] = []
        if block.orelse:
            first = block.orelse[0]
            if isinstance(first, ast.If) and lines[first.lineno - 1].lstrip().startswith("elif"):
                raise GenerationError(f"line {block.lineno}: an ASYNC block takes no elif")
            else_at = _else_line(lines, block)
            shift = _indent(lines[first.lineno - 1]) - block.col_offset
            kept = [_dedent(line, shift, block.lineno) for line in lines[else_at + 1 : end]]
        else:
            # No blank lines left doubled where the block stood.
            while start > 0 and end < len(lines) and not (lines[start - 1] + lines[end]).strip():
                end += 1
        source = "".join(lines[:start] + kept + lines[end:])


def _else_line(lines: list[str], block: ast.If) -> int:
    """The index of the ``else:`` line of ``block`` (the AST does not record it)."""
    last_body = block.body[-1].end_lineno or block.body[-1].lineno
    for index in range(last_body, block.orelse[0].lineno - 1):
        line = lines[index]
        if line.strip().startswith("else") and _indent(line) == block.col_offset:
            return index
    raise GenerationError(f"line {block.lineno}: the else of this ASYNC block was not found")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedent(line: str, shift: int, where: int) -> str:
    if not line.strip():
        return line
    if _indent(line) < shift:
        raise GenerationError(
            f"line {where}: a line of this ASYNC block's else is indented less than its code"
        )
    return line[shift:]


def _word_pattern(names: dict[str, str]) -> re.Pattern[str]:
    words = sorted(names, key=len, reverse=True)
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b")


_PROSE_WORDS = _word_pattern(NAMES)
_CODE_NAMES = {**NAMES, **MODULES}
#: Tokens whose text is prose: the names in them are swapped as whole words.
_PROSE_TOKENS = {tokenize.STRING, tokenize.COMMENT}
if sys.version_info >= (3, 12):  # f-strings are split into tokens from 3.12
    _PROSE_TOKENS.add(tokenize.FSTRING_MIDDLE)


def swap_tokens(source: str) -> str:
    """Drop ``await`` and ``async``, swap names; every other character is left as it was."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        row, col = position
        return starts[row - 1] + col

    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: list[tuple[int, int, str]] = []
    for index, token in enumerate(tokens):
        begin, end = offset(token.start), offset(token.end)
        if token.type == tokenize.NAME and token.string in ("await", "async"):
            following = tokens[index + 1]
            if token.string == "async" and following.string not in ("def", "with", "for"):
                raise GenerationError(f"line {token.start[0]}: async before {following.string!r}")
            # The keyword and the spaces after it.
            edits.append((begin, offset(following.start), ""))
        elif token.type == tokenize.NAME and token.string in _CODE_NAMES:
            edits.append((begin, end, _CODE_NAMES[token.string]))
        elif token.type in _PROSE_TOKENS:
            text = source[begin:end]
            swapped = _PROSE_WORDS.sub(lambda m: NAMES[m.group(0)], text)
            if swapped != text:
                edits.append((begin, end, swapped))
    for begin, end, replacement in reversed(edits):
        source = source[:begin] + replacement + source[end:]
    return source


def ruff(text: str, target: str, *args: str) -> str:
    """``text`` through ``ruff ARGS -``, configured as the file ``target`` would be."""
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--stdin-filename", target, "-"],
        input=text,
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode != 0:
        raise GenerationError(f"ruff {' '.join(args)} refused {target}: {done.stderr.strip()}")
    return done.stdout


def generate(twin: Twin) -> str:
    """The text of ``twin.target`` as this script writes it."""
    text = transform((ROOT / twin.source).read_text(), twin)
    text = ruff(text, twin.target, "check", "--select", "I", "--fix-only", "--quiet")
    return ruff(text, twin.target, "format", "--quiet")


def stale() -> list[tuple[Twin, str]]:
    """Each twin whose file differs from its generated text, with that text."""
    out = []
    for twin in TWINS:
        text = generate(twin)
        path = ROOT / twin.target
        if not path.exists() or path.read_text() != text:
            out.append((twin, text))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a twin is stale"
    )
    options = parser.parse_args(argv)
    try:
        outdated = stale()
    except GenerationError as exc:
        print(f"async_to_sync: {exc}", file=sys.stderr)
        return 2
    for twin, text in outdated:
        if options.check:
            print(f"{twin.target} is stale: run `{COMMAND}`", file=sys.stderr)
        else:
            (ROOT / twin.target).write_text(text)
            print(f"wrote {twin.target} from {twin.source}")
    return 1 if options.check and outdated else 0


if __name__ == "__main__":
    sys.exit(main())
