"""Server instructions per workflow node against a plain job, counted by valgrind. Not a test.

Usage::

    python bench/workflow_cost.py                  # 300 and 900 statements per variant

The chain target of issue 11 (a 1,000-node chain at >= 80 % of one worker's
plain drain) is about what the server does per node: one worker waits for
every statement. Time per statement moves with the machine's load;
instructions do not. This counts them as ``statement_cost.py`` does
(``lib.callgrind``: one data folder per run, PostgreSQL in single-user mode
under callgrind, the worker's session settings, PREPAREd statements EXECUTEd N
times, each its own transaction; N2 - N1 statements cancel start-up out), for:

  plain       the worker's plain statement, each finishing the job the one
              before claimed and claiming the next (prefetch 1)
  chain       a workflow of nodes each after the one before: the first
              statement claims the first node, every later one finishes node
              i, hands node i + 1 over and runs the workflow trigger (tally,
              release): the ``handover`` variant for the first node, which
              was claimed, then the ``solo`` variant (no claim CTEs) for the
              nodes that were handed over, as the worker sends them
  chain, handover with the claim (no solo)
              every node's finish as the ``handover`` variant
  chain (before 0014, no solo)
              that, with migration 0014's down SQL applied first: the
              trigger calling workflow_tally and workflow_release behind
              their WHEN clauses (the build before this work)
  fan part    (with --fan) root -> parts -> join: a part's finish, which
              takes one off the join's gate and claims the next part from
              the queue: the plain statement once the worker's policy gave
              up the hand-over for the parts (one part in 128 still tries
              it); before 0014, the ``handover`` variant for every part

It prints instructions and WAL bytes per statement, and chain / plain.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import psycopg
import workflows
from lib.callgrind import DATABASE, per_statement, single_user_input
from lib.report import table
from lib.statements import WORKER_SESSION, downs, statement, succeeded
from lib.statements import execute as finish
from lib.workers import enqueue_noops

from queue_engine.foundation.embedded import EmbeddedPostgres
from queue_engine.foundation.sql import compiler
from queue_engine.worker import store
from queue_engine.worker.handover import HandoverPolicy
from queue_engine.worker.outcomes import Outcome


def load_chain(dsn: str, nodes: int) -> None:
    """One workflow of ``nodes`` no-op nodes, each after the one before (as workflows.py's)."""
    workflows.chain(nodes)(dsn)


def load_fan(dsn: str, parts: int) -> None:
    """root -> ``parts`` parts -> join (the join counts its parents through gates)."""
    workflows.fan(parts)(dsn)


def load_plain(dsn: str, jobs: int) -> None:
    """``jobs`` queued no-op jobs."""
    enqueue_noops(dsn, jobs)


def job_ids(pg_dsn: str) -> list[int]:
    """The jobs' ids in the order the statements meet them (node order: nodes are inserted so)."""
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT id FROM queue_engine.jobs ORDER BY id").fetchall()
    return [int(r[0]) for r in rows]


def execute(name: str, names: tuple[str, ...], finished: int | None) -> str:
    """The worker's statement finishing ``finished`` (None: claiming only)."""
    return finish(name, names, [] if finished is None else [succeeded(finished)])


def worker_statements() -> tuple[
    compiler.RawStatement, compiler.RawStatement, compiler.RawStatement
]:
    """A prefetch-1 worker's statements: plain, with the hand-over, and ``solo``.

    Each finishes one job and claims one (``store.worker_tags``: ``onefinish``
    and ``oneclaim``), as the worker sends them; the claim with nothing to
    finish is the plain one with an empty outcome list here.
    """
    one = store.worker_tags(1, 1)
    return statement(one), statement((*one, "handover")), statement((*one, "handover", "solo"))


def fan_script(ids: list[int], n: int, solo: bool) -> list[str]:
    """The EXECUTEs of one worker draining a fan (after the PREPAREs).

    The root's finish hands part 0 over. With ``solo`` (this build), part 0's
    finish is the ``solo`` variant, which hands nothing over (the join waits
    for the other parts), so a claim-only statement follows, as the worker
    runs it; the next parts' finishes carry the hand-over until the worker's
    policy has seen three misses in a row (worker/handover.py), then only
    every 128th does. Without (the build before), every part's finish is the
    ``handover`` variant.
    """
    cold, hand, alone = worker_statements()
    policy = HandoverPolicy()
    out = [execute("fc", cold.names, None), execute("fh", hand.names, ids[0])]
    if solo:
        out += [execute("fs", alone.names, ids[1]), execute("fc", cold.names, None)]
        policy.note([Outcome(ids[1], 1, "succeeded", "succeeded", workflow_id=1)], True, [])
    else:
        out.append(execute("fh", hand.names, ids[1]))
    for i in range(2, n):
        batch = [Outcome(ids[i], 1, "succeeded", "succeeded", workflow_id=1)]
        tried = not solo or policy.should_try(batch)
        policy.note(batch, tried, [])
        out.append(
            execute("fh", hand.names, ids[i]) if tried else execute("fc", cold.names, ids[i])
        )
    return out[:n]


def script(ids: list[int], n: int, chain: bool | None, solo: bool = True) -> str:
    """Single-user input: claim the first job, then N - 1 finish-and-claims.

    A chain's first node is claimed from the queue, so its finish is the
    ``handover`` variant; every later node was handed over, so the worker
    sends its finish as ``solo`` (unless ``solo`` is false: the build before).
    """
    cold, hand, alone = worker_statements()
    lines = [
        *WORKER_SESSION,
        f"PREPARE fc AS {cold.text};",
        f"PREPARE fh AS {hand.text};",
        f"PREPARE fs AS {alone.text};",
    ]
    if chain is None:  # a fan
        lines += fan_script(ids, n, solo)
        n = 0
    else:
        lines.append(execute("fc", cold.names, None))
    for i in range(1, n):
        if chain and solo and i > 1:
            lines.append(execute("fs", alone.names, ids[i - 1]))
        elif chain:
            lines.append(execute("fh", hand.names, ids[i - 1]))
        else:
            lines.append(execute("fc", cold.names, ids[i - 1]))
    lines.append("SELECT count(*) AS left_waiting FROM queue_engine.jobs WHERE status = 'waiting';")
    return single_user_input(lines)


def measure(
    label: str, chain: bool | None, ddl: str, n1: int, n2: int, solo: bool = True
) -> tuple[float, float]:
    """Instructions and WAL bytes per statement; ``chain`` None: the fan."""

    def input_for(pg: EmbeddedPostgres, n: int) -> str:
        pg.start()
        ids = job_ids(pg.dsn(DATABASE))
        pg.stop()
        return script(ids, n, chain, solo)

    load = load_fan if chain is None else load_chain if chain else load_plain
    return per_statement(label, (n1, n2), ddl, n2 + 10, input_for, load)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="300,900", help="N1,N2 statements")
    parser.add_argument("--fan", action="store_true", help="also a fan's parts")
    parser.add_argument(
        "--ddl",
        action="append",
        default=[],
        help="SQL file applied after loading (a candidate change); adds 'plain', 'chain' "
        "and 'fan part' runs with it (repeatable)",
    )
    parser.add_argument(
        "--only", default="", help="comma list: run only the runs whose label starts so"
    )
    opts = parser.parse_args()
    n1, n2 = (int(x) for x in opts.counts.split(","))
    before = downs(14)
    runs: dict[str, tuple[bool | None, str, bool]] = {
        "plain": (False, "", True),
        "chain": (True, "", True),
        "chain, handover with the claim (no solo)": (True, "", False),
        "chain (before 0014, no solo)": (True, before, False),
    }
    if opts.fan:
        runs["fan part"] = (None, "", True)
        runs["fan part (before 0014)"] = (None, before, False)
    for path in opts.ddl:
        extra = Path(path).read_text().replace("__SCHEMA__", "queue_engine")
        runs[f"plain + {Path(path).name}"] = (False, extra, True)
        runs[f"chain + {Path(path).name}"] = (True, extra, True)
        runs[f"fan part + {Path(path).name}"] = (None, extra, True)
    if opts.only:
        wanted = tuple(x.strip() for x in opts.only.split(",") if x.strip())
        runs = {k: v for k, v in runs.items() if k.startswith(wanted)}
    print(f"server instructions per statement ({n2} - {n1} statements):\n")

    def rows() -> Iterator[list[str]]:
        plain = 0.0
        for label, (chain, ddl, solo) in runs.items():
            per, wal = measure(label, chain, ddl, n1, n2, solo)
            plain = plain or per
            yield [label, f"{per:,.0f}", f"{wal:,.0f}", f"{per / plain:.2f}"]

    header = ["run", "instructions per statement", "WAL bytes per statement", "/ plain"]
    table(header, rows())


if __name__ == "__main__":
    main()
