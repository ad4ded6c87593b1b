"""The bodies and answers of ``/api/v1/limits`` and ``/api/v1/partitions``.

One answer model per list (:class:`LimitOut`, :class:`PartitionOut`), the
fields of :class:`~queue_engine.operator.flow.KeyFlow` and
:class:`~queue_engine.operator.flow.PartitionFlow`: a figure another control
adds there (a key's rate, a partition's weight) is one field here too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from queue_engine.operator.limits import LIMIT_RANGE
from queue_engine.web.api.fields import JSON_NUMBER
from queue_engine.web.api.models import Open, Strict


class LimitBody(Strict):
    """A key's limit: at most ``max_running`` of its jobs run at once (0 holds the key)."""

    max_running: Annotated[int, Field(ge=LIMIT_RANGE[0], le=LIMIT_RANGE[1]), JSON_NUMBER]


class LimitOut(Open):
    """A concurrency key: the operator's limit, the effective one, running and waiting jobs."""

    key: str
    max_running: int | None = Field(description="the operator's limit (null: none set)")
    limit: int | None = Field(
        description="the effective limit: the operator's, else the largest concurrency_limit "
        "of the key's running jobs (null: none known)"
    )
    running: int
    waiting: int = Field(description="due queued jobs the claim skips because the key is full")
    waiting_at_least: bool = Field(
        description="waiting was counted over the first QUEUE_ENGINE_STATS_EXACT_CAP due "
        "jobs and is a lower bound"
    )
    set_at: datetime | None


class LimitsOut(Open):
    """Every limit operators set, by key."""

    limits: list[LimitOut]


class LimitSetOut(Open):
    """A limit set: the key, its new and previous limit, its running jobs now."""

    key: str
    max_running: int
    previous: int | None
    running: int
    changed: bool


class LimitCleared(Open):
    """A limit removed: the limit it had."""

    key: str
    previous: int


class PartitionOut(Open):
    """A partition of a queue: its due queued jobs and its running jobs."""

    partition_key: str
    queued: int
    running: int
    queued_at_least: bool = Field(
        description="queued was counted over the queue's first QUEUE_ENGINE_STATS_EXACT_CAP "
        "due jobs and is a lower bound"
    )


class PartitionsOut(Open):
    """A queue's deepest partitions, deepest first."""

    queue: str
    partitions: list[PartitionOut]
