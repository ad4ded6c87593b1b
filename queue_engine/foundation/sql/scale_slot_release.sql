-- Give up a scale slot taken by scale_slot_take.sql (the limit went down below
-- it, or away): another worker may take it at once.
SELECT pg_advisory_unlock(hashtext(%(namespace)s), %(slot)s)
