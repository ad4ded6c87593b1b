"""Building a workflow in Python, and checking it before anything is written.

Every mistake a caller can make in the shape of a workflow (a repeated node
name, an edge to a node that does not exist, a cycle, a bad job option) is
refused here with a message naming the node, so a refused workflow writes
nothing. The database checks the same shape again (``start_workflow`` in
migration 0007) for callers that use SQL directly, but it can only say "not an
earlier node": ordering the nodes so that every parent comes first is done
here, which is also where a cycle can be named.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Unpack

from queue_engine.foundation.errors import ValidationError
from queue_engine.producer.tasks import registry
from queue_engine.producer.validation import (
    EnqueueOptions,
    JobSpec,
    build_spec,
    check_option_names,
    spec_from_options,
)
from queue_engine.producer.workflows import refs

#: The task name of an input node: never claimed by a worker; it ends when a
#: value is provided (``Client.provide_input``) or its timeout passes.
INPUT_TASK = "queue-engine:input"
NODE_PATTERN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$")
NAME_PATTERN = NODE_PATTERN
#: The schema's limit (workflows_counts_check).
MAX_NODES = 100_000
Requires = Literal["succeeded", "finished"]
#: Job options a node may not carry: the workflow's own idempotency key stands
#: for all its nodes, and a node skipped by a dedupe conflict would leave a hole.
NODE_REFUSED_OPTIONS: tuple[Literal["idempotency_key", "dedupe_key"], ...] = (
    "idempotency_key",
    "dedupe_key",
)


@dataclass(frozen=True, slots=True)
class After:
    """An edge from a parent node: ``requires`` says what the child needs of it.

    ``"succeeded"`` (the default): the parent must succeed; if it fails, is
    canceled or lost, the child and its descendants are canceled, and if it is
    skipped, they are skipped. ``"finished"``: any end of the parent will do;
    the child runs anyway and sees how its parents ended (``ctx.parents``).
    """

    node: str
    requires: Requires = "succeeded"


def finished(node: str) -> After:
    """An edge that runs the child whatever way ``node`` ended."""
    return After(node, "finished")


@dataclass(slots=True)
class _Node:
    name: str
    spec: JobSpec
    after: list[After] = field(default_factory=list)
    input: bool = False


class Workflow:
    """A DAG of named job nodes, started atomically by ``Client.start_workflow``.

    >>> wf = Workflow("nightly", idempotency_key="nightly:2026-11-23")
    >>> wf.add("fetch", "etl.fetch", args={"day": "2026-11-23"})
    'fetch'
    >>> wf.add("load", "etl.load", after=["fetch"])
    'load'
    """

    def __init__(
        self, name: str, *, idempotency_key: str | None = None, producer: str | None = None
    ) -> None:
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise ValidationError(
                f"workflow name must be 1-128 characters of letters, digits and _.:- "
                f"(not starting with . : -), got {name!r}"
            )
        for label, value in (("idempotency_key", idempotency_key), ("producer", producer)):
            if value is not None and (
                not isinstance(value, str) or not 1 <= len(value) <= 255 or "\x00" in value
            ):
                raise ValidationError(
                    f"workflow {label} must be a string of 1-255 characters, without NUL"
                )
        self.name = name
        self.idempotency_key = idempotency_key
        self.producer = producer
        self._nodes: dict[str, _Node] = {}

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def node_names(self) -> list[str]:
        """The node names, in the order they were added."""
        return list(self._nodes)

    def add(
        self,
        node: str,
        task: str,
        *,
        after: Iterable[str | After] = (),
        skip_if: dict[str, Any] | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> str:
        """Add a job node running ``task``; ``options`` are ``Client.enqueue``'s.

        ``after`` names parent nodes (strings, or :class:`After` for a
        requirement other than success); they may be added later. ``skip_if``
        is a predicate on the parents (:mod:`.refs`): when it holds at the
        claim, the node ends ``skipped`` without running. It travels in the
        args under ``$skip_if``, so a workflow started from JSON or SQL
        declares it the same way. Returns the node name, so
        ``after=[wf.add(...)]`` reads naturally.
        """
        where = self._check_name(node)
        if task == INPUT_TASK:
            raise ValidationError(f"{where}: use Workflow.input() for an input node")
        for refused in NODE_REFUSED_OPTIONS:
            if options.get(refused) is not None:
                raise ValidationError(
                    f"{where}: a node cannot carry {refused}; give the workflow an "
                    "idempotency_key instead"
                )
        check_option_names({"task": task, **options}, where=where)
        edges = self._edges(where, after)
        args = options.get("args")
        if skip_if is not None and (args is None or isinstance(args, dict)):
            if args is not None and refs.SKIP_KEY in args:
                raise ValidationError(f"{where}: skip_if is given twice (and in args)")
            args = options["args"] = {**(args or {}), refs.SKIP_KEY: skip_if}
        try:
            spec = spec_from_options(task, options, registry.get(task))
            if isinstance(args, dict) and refs.has_references(args):
                refs.check(args, [e.node for e in edges])
        except (ValidationError, refs.BadReference) as exc:
            raise ValidationError(f"{where}: {exc}") from None
        self._nodes[node] = _Node(node, spec, edges)
        return node

    def input(
        self,
        node: str,
        *,
        after: Iterable[str | After] = (),
        timeout_s: int | None = None,
        queue: str | None = None,
    ) -> str:
        """Add an input node: it waits for a value given by ``Client.provide_input``.

        Once its parents have ended well it awaits the value; with
        ``timeout_s`` it fails if none comes within that many seconds, which
        cancels the children that require it. ``queue`` only labels it.
        """
        where = self._check_name(node)
        try:
            spec = build_spec(INPUT_TASK, queue=queue, timeout_s=timeout_s, max_attempts=1)
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None
        self._nodes[node] = _Node(node, spec, self._edges(where, after), input=True)
        return node

    def _check_name(self, node: str) -> str:
        if not isinstance(node, str) or not NODE_PATTERN.fullmatch(node):
            raise ValidationError(
                f"node name must be 1-128 characters of letters, digits and _.:- "
                f"(not starting with . : -), got {node!r}"
            )
        where = f"workflow {self.name}, node {node}"
        if node in self._nodes:
            raise ValidationError(f"{where}: a node of that name was already added")
        if len(self._nodes) >= MAX_NODES:
            raise ValidationError(f"workflow {self.name}: at most {MAX_NODES} nodes")
        return where

    @staticmethod
    def _edges(where: str, after: Iterable[str | After]) -> list[After]:
        if isinstance(after, str | After):
            after = [after]
        edges: list[After] = []
        seen: set[str] = set()
        for item in after:
            edge = After(item) if isinstance(item, str) else item
            if not isinstance(edge, After) or not isinstance(edge.node, str):
                raise ValidationError(
                    f"{where}: after takes node names or After(...), got {item!r}"
                )
            if edge.requires not in ("succeeded", "finished"):
                raise ValidationError(
                    f"{where}: requires must be 'succeeded' or 'finished', got {edge.requires!r}"
                )
            if edge.node in seen:
                raise ValidationError(f"{where}: after names {edge.node} twice")
            seen.add(edge.node)
            edges.append(edge)
        return edges

    def ordered(self) -> list[str]:
        """The node names with every parent before its children (added order where free).

        Raises :class:`ValidationError` for an unknown parent or a cycle.
        """
        if not self._nodes:
            raise ValidationError(f"workflow {self.name} has no nodes")
        index = {name: i for i, name in enumerate(self._nodes)}
        children: dict[str, list[str]] = {name: [] for name in self._nodes}
        waiting: dict[str, int] = {}
        for name, node in self._nodes.items():
            for edge in node.after:
                if edge.node not in index:
                    raise ValidationError(
                        f"workflow {self.name}, node {name}: after names {edge.node}, "
                        "which is not a node of this workflow"
                    )
                if edge.node == name:
                    raise ValidationError(
                        f"workflow {self.name}, node {name}: a node cannot come after itself"
                    )
                children[edge.node].append(name)
            waiting[name] = len(node.after)
        ready = [(index[n], n) for n, w in waiting.items() if w == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            _, name = heapq.heappop(ready)
            order.append(name)
            for child in children[name]:
                waiting[child] -= 1
                if waiting[child] == 0:
                    heapq.heappush(ready, (index[child], child))
        if len(order) < len(self._nodes):
            left = {n for n, w in waiting.items() if w > 0}
            raise ValidationError(f"workflow {self.name} has a cycle: {self._cycle(left)}")
        return order

    def _cycle(self, left: set[str]) -> str:
        """One cycle among the nodes Kahn's algorithm could not order, for the message."""
        start = min(left, key=list(self._nodes).index)
        path: list[str] = []
        seen: dict[str, int] = {}
        node = start
        while node not in seen:
            seen[node] = len(path)
            path.append(node)
            node = next(e.node for e in self._nodes[node].after if e.node in left)
        loop = [*path[seen[node] :], node]
        return " <- ".join(loop) + " (each node named after the one it waits for)"

    def payload(self) -> str:
        """The JSON array ``start_workflow`` takes: nodes in order, parents first."""
        return json.dumps([self._node_json(self._nodes[name]) for name in self.ordered()])

    @staticmethod
    def _node_json(node: _Node) -> dict[str, Any]:
        spec = node.spec
        out: dict[str, Any] = {
            "node": node.name,
            "task": spec.task,
            "queue": spec.queue,
            "args": json.loads(spec.args_json),
            "priority": spec.priority,
            "max_attempts": spec.max_attempts,
            # Whose published defaults fill what is still null (start_workflow,
            # migration 0028); null: this process declares the task and filled them.
            "defaults_of": spec.defaults_of,
        }
        optional = {
            "run_at": spec.run_at.isoformat() if spec.run_at is not None else None,
            "delay_s": spec.delay_s,
            "timeout_s": spec.timeout_s,
            "lease_ttl_s": spec.lease_ttl_s,
            "lock_key": spec.lock_key,
            "partition_key": spec.partition_key,
            "producer": spec.producer,
            "affinity_key": spec.affinity_key,
            "concurrency_key": spec.concurrency_key,
            "concurrency_limit": spec.concurrency_limit,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if node.after:
            out["after"] = [{"node": e.node, "requires": e.requires} for e in node.after]
        return out


def node_names_of(payload: Sequence[dict[str, Any]]) -> list[str]:
    """The node names of a payload (for messages and tests)."""
    return [str(n["node"]) for n in payload]
