-- The jobs of a demo or benchmark run, with why each earlier attempt ended
-- (the messages of its running -> queued/failed events), for the live view and
-- the summary of `queue-ctl demo`.
SELECT j.id, j.task, j.status, j.attempt, j.max_attempts, j.progress, j.created_at,
       j.available_at, j.started_at, j.finished_at, j.duration_ms,
       ARRAY(SELECT e.message FROM __SCHEMA__.job_events e
             WHERE e.job_id = j.id AND e.from_status = 'running'
               AND e.to_status IN ('queued', 'failed')
             ORDER BY e.id) AS failures
FROM __SCHEMA__.jobs_all j
WHERE j.id = ANY(%(ids)s::bigint[])
ORDER BY j.id
