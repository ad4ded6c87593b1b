"""How long ``queue-ctl`` and the daemons take to start, timed from outside. Not a test.

Usage::

    python bench/cli_startup.py                          # this build, 9 rounds
    python bench/cli_startup.py --ab OTHER/.venv/bin/python --rounds 9
    python bench/cli_startup.py --dsn postgresql://...   # a server of your own

Each figure is a whole process, as a shell runs it: ``queue-ctl status 1``,
``queue-ctl enqueue``, ``queue-ctl --help``, each daemon's ``--help``, and a
worker's time to ready (from its start to its ``worker.started`` line: it has
connected, waited for the schema, registered and listens), beside
``python -c pass`` (the interpreter alone) and ``python -c "import psycopg,
click"`` (the floor of any command that talks to the database), all in the
same run. Every command runs once as a warm-up, then ``--rounds`` times,
round-robin (with ``--ab``, this build and the other one in turn, A B A B),
and the median, min and max of the wall time and of the child's CPU time
(user + system) are printed, with the ratio to this build's median when
``--ab`` is given. Machines shared with other work are noisy: quote medians,
and compare builds only within one run.

``--ab PYTHON`` names the interpreter of another build (a virtualenv of the
base commit): its console scripts, next to it, are run on the same database.
Without ``--dsn`` an embedded Postgres is started for the run (the ``embedded``
extra) and removed afterwards; the database is migrated by this build and
holds one job, the one ``status`` shows. Both builds' packages are
byte-compiled first, so that an environment with ``PYTHONDONTWRITEBYTECODE``
set does not time the compiler (an editable install run that way compiles
every module it imports, at every call).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from lib.builds import Build
from lib.postgres import server
from lib.report import table

#: How long a worker may take to say it is ready before the run gives up.
READY_TIMEOUT_S = 60.0


@dataclass
class Figures:
    """The measured runs of one command on one build."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def _env() -> dict[str, str]:
    """This environment without libpq or engine settings: every command gets ``--dsn``."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PG", "QUEUE_ENGINE_"))}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one finished process (its output read and dropped)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=_env(), stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return wall, _children_cpu() - cpu


def worker_ready(build: Build, dsn: str) -> tuple[float, float]:
    """Seconds from a worker's start to its ``worker.started`` line (CPU: not measured, 0)."""
    argv = [
        build.script("queue-claim-worker"),
        *("--dsn", dsn, "--queue", "bench", "--app", "queue_engine.demo.bench_app"),
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=_env(), text=True
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "worker.started" in line:
                return time.perf_counter() - start, 0.0
            if time.perf_counter() - start > READY_TIMEOUT_S:
                break
        raise SystemExit(f"the worker of {build.label} did not start: exit {proc.poll()}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def commands(dsn: str, job_id: int) -> dict[str, Callable[[Build], tuple[float, float]]]:
    """What is timed, by label: each a function of the build that runs it once."""

    def script(name: str, *args: str) -> Callable[[Build], tuple[float, float]]:
        return lambda build: run_once([build.script(name), *args])

    def python(*args: str) -> Callable[[Build], tuple[float, float]]:
        return lambda build: run_once([build.python, *args])

    return {
        "python -c pass": python("-c", "pass"),
        'python -c "import psycopg, click"': python("-c", "import psycopg, click"),
        "queue-ctl --help": script("queue-ctl", "--help"),
        "queue-ctl status 1": script("queue-ctl", "--dsn", dsn, "status", str(job_id)),
        "queue-ctl enqueue": script(
            "queue-ctl", "--dsn", dsn, "enqueue", "bench.noop", "--args", '{"n": 1}'
        ),
        "queue-claim-worker --help": script("queue-claim-worker", "--help"),
        "queue-orchestrator --help": script("queue-orchestrator", "--help"),
        "queue-scheduler --help": script("queue-scheduler", "--help"),
        "queue-web --help": script("queue-web", "--help"),
        "worker: start to ready": lambda build: worker_ready(build, dsn),
    }


def prepare(dsn: str) -> int:
    """Migrate with this build and enqueue the job ``status`` shows; its id."""
    from queue_engine import Client, Migrator

    Migrator(dsn).up()
    with Client(dsn) as client:
        return client.enqueue("bench.noop", args={"n": 0}).id


def byte_compile(build: Build) -> None:
    """Compile the build's package, so no run pays for compiling its sources."""
    where = subprocess.run(
        [
            build.python,
            "-c",
            "import os, queue_engine; print(os.path.dirname(queue_engine.__file__))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run([build.python, "-m", "compileall", "-q", where], check=True)


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def report(results: dict[str, dict[str, Figures]], builds: list[Build], rounds: int) -> None:
    """A Markdown table: median (min-max) seconds per build, wall then CPU."""
    names = [b.label for b in builds]
    header = ["command", *(f"{n} wall s" for n in names), *(f"{n} cpu s" for n in names)]
    if len(builds) == 2:
        header.append(f"wall {names[1]}/{names[0]}")
    print(f"\n{rounds} rounds each, median (min-max); commands in turn, builds in turn\n")
    rows = []
    for label, per_build in results.items():
        cells = [label, *(_cell(per_build[n].wall) for n in names)]
        cells += [_cell(per_build[n].cpu) if any(per_build[n].cpu) else "-" for n in names]
        if len(builds) == 2:
            ratio = statistics.median(per_build[names[1]].wall) / statistics.median(
                per_build[names[0]].wall
            )
            cells.append(f"{ratio:.2f}")
        rows.append(cells)
    table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="counted runs of each command")
    parser.add_argument("--ab", metavar="PYTHON", help="another build's interpreter, alternated")
    parser.add_argument("--dsn", help="a server of your own (default: an embedded one)")
    parser.add_argument("--only", help="only the commands whose label contains this text")
    options = parser.parse_args()

    builds = [Build.this()] + ([Build("other", options.ab)] if options.ab else [])
    for build in builds:
        byte_compile(build)
    with server(options.dsn or "") as dsn:
        job_id = prepare(dsn)
        todo = {
            label: run
            for label, run in commands(dsn, job_id).items()
            if not options.only or options.only in label
        }
        results = {label: {b.label: Figures() for b in builds} for label in todo}
        for run in todo.values():  # warm-up: caches, first connections
            for build in builds:
                run(build)
        for _ in range(options.rounds):
            for label, run in todo.items():
                for build in builds:
                    wall, cpu = run(build)
                    results[label][build.label].wall.append(wall)
                    results[label][build.label].cpu.append(cpu)
        report(results, builds, options.rounds)


if __name__ == "__main__":
    main()
