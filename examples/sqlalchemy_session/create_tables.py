"""Create the example's table: ``python create_tables.py`` (with QUEUE_ENGINE_DSN set).

A real app runs its own migrations (Alembic, ...) next to the engine's.
"""

from __future__ import annotations

import os

from billing import Base, make_engine

if __name__ == "__main__":
    Base.metadata.create_all(make_engine(os.environ["QUEUE_ENGINE_DSN"]))
