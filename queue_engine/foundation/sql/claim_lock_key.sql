-- Session advisory lock on a job's lock_key, held while the job runs: a zombie of
-- an earlier attempt (its lease expired but its process still runs the handler)
-- still holds it, so the new attempt waits instead of running alongside it.
-- %(namespace)s is "<schema>.lock_key:" (sql.lock_key_namespace): each engine
-- schema has a key space of its own, apart from the engine's other locks, so two
-- engines in one database never wait on each other's keys.
SELECT pg_try_advisory_lock(hashtextextended(%(namespace)s || %(lock_key)s, 0))
