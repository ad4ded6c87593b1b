"""The synchronous modules generated from their asyncio twins (``scripts/async_to_sync.py``).

``queue_engine/producer/client.py`` and ``queue_engine/testing/assertions.py`` are
written by the script from ``async_client.py`` and
``testing/async_assertions.py``. The first test generates each again and
fails when the committed file differs: an edit of one face that was not
carried to the other, or a hand edit of a generated file. The others hold
the script's conventions (docs/internals/architecture.md, "Generated
twins") on small sources.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "async_to_sync.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


a2s = _load_script()
SNIPPET = a2s.Twin("pkg/thing_async.py", "pkg/thing.py")


@pytest.mark.parametrize("twin", a2s.TWINS, ids=lambda twin: twin.target)
def test_each_generated_module_is_what_the_script_writes(twin: Any) -> None:
    assert (ROOT / twin.target).read_text() == a2s.generate(twin), (
        f"{twin.target} differs from what scripts/async_to_sync.py generates from "
        f"{twin.source}: edit the asyncio module, then run `python scripts/async_to_sync.py`"
    )


def test_await_and_async_go_and_names_are_swapped_in_code_and_prose() -> None:
    source = (
        '"""Through ``AsyncClient``; this is async_client.py."""\n'
        "from queue_engine.producer.async_client import AsyncClient\n"
        "\n"
        "\n"
        "async def f(c: AsyncClient) -> None:\n"
        "    async with c._connection(None) as conn:  # the AsyncConnection\n"
        '        await conn.execute("SELECT 1")\n'
    )
    assert a2s.transform(source, SNIPPET) == a2s.header(SNIPPET) + (
        '"""Through ``Client``; this is async_client.py."""\n'
        "from queue_engine.producer.client import Client\n"
        "\n"
        "\n"
        "def f(c: Client) -> None:\n"
        "    with c._connection(None) as conn:  # the Connection\n"
        '        conn.execute("SELECT 1")\n'
    )


def test_an_async_block_keeps_its_else_dedented_or_nothing() -> None:
    source = (
        "if True:  # ASYNC\n"
        "    import asyncio\n"
        "else:\n"
        "    import threading\n"
        "\n"
        "\n"
        "class C:\n"
        "    if True:  # ASYNC\n"
        "\n"
        "        async def close(self) -> None:\n"
        "            await asyncio.sleep(0)\n"
        "\n"
        "    else:\n"
        "\n"
        "        def close(self) -> None:\n"
        "            threading.Event().wait(0)\n"
        "\n"
        "    def name(self) -> str:\n"
        "        if True:  # ASYNC\n"
        '            return "async"\n'
        '        return "sync"\n'
    )
    assert a2s.transform(source, SNIPPET) == a2s.header(SNIPPET) + (
        "import threading\n"
        "\n"
        "\n"
        "class C:\n"
        "\n"
        "    def close(self) -> None:\n"
        "        threading.Event().wait(0)\n"
        "\n"
        "    def name(self) -> str:\n"
        '        return "sync"\n'
    )


def test_a_prose_phrase_the_source_lost_stops_the_generation() -> None:
    twin = a2s.Twin("pkg/thing_async.py", "pkg/thing.py", prose=(("for asyncio", "for threads"),))
    assert a2s.transform('"""Made for asyncio."""\n', twin).endswith('"""Made for threads."""\n')
    with pytest.raises(a2s.GenerationError, match="'for asyncio' of its twin's prose"):
        a2s.transform('"""Made for trio."""\n', twin)
