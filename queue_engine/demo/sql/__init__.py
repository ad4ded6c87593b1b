"""The statements of ``queue-ctl demo`` and ``bench``: reports of a run, which no engine process sends.

Named files, one statement each, written and loaded as the engine's are
(:mod:`queue_engine.foundation.sql`, ``docs/internals/sql.md``): this module
only points the loader at this folder, so the demo's wing holds its code and
its SQL together and the engine's catalogue holds what the engine runs.
"""

from __future__ import annotations

from typing import LiteralString

from queue_engine.foundation import sql as engine


def query(name: str, schema: str) -> LiteralString:
    """Return the statement ``demo/sql/<name>.sql`` for the given engine schema."""
    return engine.render(engine.source(name, __name__), schema)


def plain(name: str) -> LiteralString:
    """Return a statement of this folder that names no engine object (no ``__SCHEMA__``)."""
    return engine.source(name, __name__)
