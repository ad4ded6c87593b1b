-- Every schedule, by name, with what the ticker and `queue-ctl schedules list` need.
SELECT s.name, s.expression, s.tz, s.task, s.queue, s.args, s.priority, s.max_attempts,
       s.timeout_s, s.catchup, s.overlap, s.enabled, s.source, s.app, s.checked_until,
       s.last_slot, s.last_job_id, s.created_at, s.updated_at, s.workflow, s.last_workflow_id
FROM __SCHEMA__.schedules s
ORDER BY s.name
