"""CPU per job and end-of-drain times from a shared-harness results file. Not a test.

Usage::

    python bench/harness_cpu.py /tmp/qe-harness/results/<run>.json   # the run's results file

The harness's drain rate is N / (the poll that first sees no job left - the
first job's start), and it polls at a quarter of the time it estimates is
left, but at most every 0.5 s. A drain of 10,000 jobs at 20,000-40,000 jobs/s
lasts 0.25-0.5 s, so that rate is decided by when the poll comes: a system
whose workers have started a few jobs by the second poll (0.25 s after the
spawn) estimates a long drain and sleeps 0.5 s, and every such round ends at
the same moment, whatever the drain took. The harness also records the CPU
of the server's processes and of the workers per job for each drain
(``cpu_ms_per_job_server`` / ``_workers``), which the poll does not touch:
on two busy cores, throughput goes as one over that sum. This prints, per
system and drain (medians of the rounds), both CPU figures, their sum, the
rate, and each round's end as seconds after the workers were spawned.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results/<timestamp>.json of the harness")
    options = parser.parse_args()
    runs = json.loads(options.results.read_text())["runs"]
    rows: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    for run in runs:
        if "cpu_ms_per_job_server" not in run:
            continue
        key = (run["scenario"], int(run.get("k") or 0), run["system"])
        rows.setdefault(key, []).append(run)
    print(
        "| drain | system | jobs/s | server CPU ms/job | workers CPU ms/job | sum | ends, s after spawn |"
    )
    print("|---|---|---|---|---|---|---|")
    for (scenario, k, system), rounds in sorted(rows.items()):
        server = statistics.median(r["cpu_ms_per_job_server"] for r in rounds)
        workers = statistics.median(r["cpu_ms_per_job_workers"] for r in rounds)
        rate = statistics.median(r["rate"] for r in rounds)
        ends = ", ".join(f"{r['startup_s'] + r['drain_s']:.3f}" for r in rounds)
        print(
            f"| {scenario} K={k} | {system} | {rate:,.0f} | {server:.3f} | {workers:.3f} | "
            f"{server + workers:.3f} | {ends} |"
        )


if __name__ == "__main__":
    main()
