"""``queue-ctl demo`` and ``queue-ctl bench``: the whole engine on this machine, shown and timed.

- :mod:`~queue_engine.demo.demo` — ``queue-ctl demo``: a real fleet on a
  throwaway server, sample jobs, live progress and a summary;
- :mod:`~queue_engine.demo.workflow` — ``queue-ctl demo --workflow``: one
  workflow, followed live, its input provided, its DAG drawn;
- :mod:`~queue_engine.demo.bench` — ``queue-ctl bench``: enqueue rate, drain
  throughput and wake latency with real worker processes;
- :mod:`~queue_engine.demo.app` and :mod:`~queue_engine.demo.bench_app` — the
  tasks their workers load (``--app queue_engine.demo.app``);
- :mod:`~queue_engine.demo.sql` — their reports, as named statements.

A face like the command line: it may import any wing, it builds on
``cli/`` (the group's context, its rendering, the child daemons of
:mod:`queue_engine.cli.fleet`), and nothing imports it (``queue-ctl`` names
its commands in its lazy table). Nothing is imported by this file.
"""
