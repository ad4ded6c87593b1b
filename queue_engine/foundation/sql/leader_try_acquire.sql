-- Leader election: a session-level advisory lock on a dedicated connection.
-- Whoever holds it leads until its session ends (clean stop, crash, network
-- loss noticed by the server); standbys call this again every second or so.
SELECT pg_try_advisory_lock(hashtextextended(%(key)s, 0))
