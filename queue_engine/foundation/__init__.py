"""The foundation: what every process of the engine stands on, and nothing above it.

Connecting and the errors a connection raises (:mod:`.db`, :mod:`.errors`,
:mod:`.exit_codes`), every ``QUEUE_ENGINE_*`` setting (:mod:`.settings`, and
the DSN and schema of :mod:`.config` and :mod:`.localfleet`), logging
(:mod:`.logs`, :mod:`.events`), the named SQL statements (:mod:`.sql`), the
schema and its migrations (:mod:`.migrate`, :mod:`.table_statistics`), the
version, and a throwaway Postgres for a laptop (:mod:`.embedded`).

A module here imports only modules here (``tests/unit/test_layers.py``): the
producer API, the operator's tools, the daemons and the faces all build on
it. Nothing is imported by this file, so ``import queue_engine.foundation.db``
loads the one module it names.
"""
