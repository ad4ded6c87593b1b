-- Release the session advisory lock taken by claim_lock_key.
SELECT pg_advisory_unlock(hashtextextended(%(namespace)s || %(lock_key)s, 0))
