-- Lock one schedule for the rest of the transaction and read it afresh, with the
-- status of its latest job, or the state of its latest workflow for a workflow
-- schedule (for overlap = 'skip'). Every scheduler acting on a
-- schedule takes this lock first, so slot decisions for one schedule are serial.
-- The job's status is read from jobs alone: it only answers "still queued or
-- running?", and a job that moved to jobs_archive (migration 0027) has
-- succeeded, which reads as NULL here and as "not active" either way.
SELECT s.name, s.expression, s.tz, s.task, s.queue, s.args, s.priority, s.max_attempts,
       s.timeout_s, s.catchup, s.overlap, s.enabled, s.source, s.workflow, s.checked_until,
       s.last_job_id,
       (SELECT j.status FROM __SCHEMA__.jobs j WHERE j.id = s.last_job_id) AS last_job_status,
       (SELECT w.state FROM __SCHEMA__.workflows w WHERE w.id = s.last_workflow_id)
           AS last_workflow_state
FROM __SCHEMA__.schedules s
WHERE s.name = %(name)s
FOR UPDATE OF s
