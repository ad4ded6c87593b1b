-- Session advisory lock on a job's lock_key, held while the job runs: a zombie of
-- an earlier attempt (its lease expired but its process still runs the handler)
-- still holds it, so the new attempt waits instead of running alongside it.
-- The key space is prefixed so it cannot collide with the engine's other locks.
SELECT pg_try_advisory_lock(hashtextextended('queue_engine.lock_key:' || %(lock_key)s, 0))
