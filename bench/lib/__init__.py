"""What the benches share: the server, the workers, timing, builds A/B'd, tables.

A bench runs as ``python bench/NAME.py``, which puts ``bench/`` first on
``sys.path``: each script imports this package as ``lib``, and the workers it
starts find ``--app lib.tasks`` through their ``PYTHONPATH``. One module per
part:

- :mod:`lib.postgres`: the server (embedded, or ``--dsn``) and fresh databases;
- :mod:`lib.workers`: ``queue-claim-worker`` processes, the bench queue, a drain;
- :mod:`lib.timing`: CPU of processes, percentiles, a paced loop;
- :mod:`lib.builds`: another checkout's build, and rounds in alternated order;
- :mod:`lib.report`: Markdown tables and progress lines;
- :mod:`lib.web`: a ``queue-web`` process;
- :mod:`lib.statements`, :mod:`lib.callgrind`: the worker's statement as a bench
  sends it, and server instructions counted in single-user PostgreSQL.
"""
