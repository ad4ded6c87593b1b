-- Session-level lock held for a whole migration run: a second runner on the
-- same ledger waits here, then finds the work done.
SELECT pg_advisory_lock(hashtextextended(%(key)s, 0))
