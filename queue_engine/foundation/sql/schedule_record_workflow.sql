-- Record the workflow a workflow schedule's slot started (start_workflow ran just
-- before, in the same transaction as the slot's schedule_runs row): link it to
-- the run row and remember it as the schedule's latest workflow (overlap = 'skip').
WITH run AS (
    UPDATE __SCHEMA__.schedule_runs r SET workflow_id = %(workflow_id)s
    WHERE r.schedule = %(name)s AND r.slot = %(slot)s::timestamptz
    RETURNING r.slot
)
UPDATE __SCHEMA__.schedules s SET
    last_workflow_id = %(workflow_id)s,
    last_slot = coalesce(greatest(s.last_slot, %(slot)s::timestamptz), s.last_slot)
WHERE s.name = %(name)s
RETURNING (SELECT count(*) FROM run) AS runs
