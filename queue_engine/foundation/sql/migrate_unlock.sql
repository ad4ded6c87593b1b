SELECT pg_advisory_unlock(hashtextextended(%(key)s, 0))
