-- Forget old slot records in batches. Slots at or before a schedule's cursor are
-- never considered again, so pruning them cannot weaken the exactly-once key.
DELETE FROM __SCHEMA__.schedule_runs r
USING (
    SELECT o.schedule, o.slot FROM __SCHEMA__.schedule_runs o
    JOIN __SCHEMA__.schedules s ON s.name = o.schedule
    WHERE o.slot < %(before)s AND o.slot <= s.checked_until
    LIMIT %(limit)s
) old
WHERE r.schedule = old.schedule AND r.slot = old.slot
