"""Refusing to run a daemon behind a transaction-pooling proxy.

Producers (``Client``, ``AsyncClient``, the SQL ``enqueue`` function) work
through PgBouncer in transaction mode: each of their calls is one transaction
and they keep nothing in the session (with ``Client(prepared_statements=False)``
when the pooler cannot carry prepared statements; docs/operations.md,
"pgbouncer and other poolers"). The daemons cannot: a worker LISTENs for wake-ups and
holds session advisory locks (lock keys, scale slots), the orchestrator's
leader holds one, and all of them set session parameters. Behind a
transaction pooler each of those silently applies to whichever server session
served that one transaction: a worker would never be woken, a lock key would
not hold. So a daemon checks at start and refuses, with a message that says
what to change, instead of running wrong.

The check: a session-level custom setting is set to a random token on one
connection; a second connection then reads it, and so does the first. Without
a pooler (or with session pooling) a server session belongs to one client:
the second connection never sees the token and the first always does. Under
transaction or statement pooling, the server session the first connection
just used goes back to the pool and PgBouncer hands it to the next client, so
the second sees the token, or the first, on its next transaction, lands on
another session and no longer does. The check can miss a pooler that happens
to give both clients fresh sessions; it cannot accuse a direct connection.
"""

from __future__ import annotations

import secrets

from queue_engine.foundation import sql as queries
from queue_engine.foundation.db import connect
from queue_engine.foundation.errors import ConfigError

#: How many reads each connection makes (each one a transaction of its own).
PROBES = 3


def shared_session_evidence(dsn: str) -> str | None:
    """What shows that sessions on ``dsn`` are shared between clients, or None."""
    token = secrets.token_hex(8)
    with connect(dsn, application_name="queue-engine-pooler-check") as first:
        first.execute(queries.plain("session_probe_set"), {"token": token})
        with connect(dsn, application_name="queue-engine-pooler-check") as second:
            for _ in range(PROBES):
                row = second.execute(queries.plain("session_probe_get")).fetchone()
                if row is not None and row[0] == token:
                    return "a second connection saw a setting made in the first one's session"
                row = first.execute(queries.plain("session_probe_get")).fetchone()
                if row is None or row[0] != token:
                    return "a setting made in this session was gone at its next transaction"
    return None


def refuse_shared_sessions(dsn: str, role: str) -> None:
    """Raise :class:`ConfigError` when ``dsn`` goes through a transaction pooler."""
    evidence = shared_session_evidence(dsn)
    if evidence is not None:
        raise ConfigError(
            f"{role} needs a database session of its own (LISTEN, advisory locks, session "
            f"settings), but its connection goes through a transaction-pooling proxy "
            f"({evidence}); connect it to Postgres directly, or through session pooling "
            "(docs/operations.md, 'pgbouncer and other poolers')"
        )
