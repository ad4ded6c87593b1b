-- Give up leadership on a clean stop, so a standby takes over at its next try
-- (closing the session would release it too; this makes the hand-over explicit).
SELECT pg_advisory_unlock(hashtextextended(%(key)s, 0))
