-- Take the lowest free scale slot of a queue, below its limit: a session
-- advisory lock (two-int form, a lock space apart from the bigint locks of lock
-- keys, leader election and migrations) on (hash of "<schema>.scale:<queue>",
-- slot). Only one session can hold a slot, so at most %(slot_limit)s workers
-- hold slots below %(slot_limit)s, whatever the races; the lock dies with the
-- session, so a killed worker's slot frees itself. The scan stops at the first
-- slot taken (LIMIT 1 over an unsorted series): no other slot is locked.
-- Returns no row when every slot is held (the worker parks).
SELECT s.slot
FROM generate_series(0, %(slot_limit)s - 1) AS s(slot)
WHERE pg_try_advisory_lock(hashtext(%(namespace)s), s.slot)
LIMIT 1
