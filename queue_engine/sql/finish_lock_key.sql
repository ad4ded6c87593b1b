-- Release the session advisory lock taken by claim_lock_key.
SELECT pg_advisory_unlock(hashtextextended('queue_engine.lock_key:' || %(lock_key)s, 0))
