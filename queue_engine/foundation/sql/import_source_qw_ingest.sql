-- queue-ctl import --from queue_workflows: the next batch of unfinished
-- ingest jobs (`ingest_jobs`, the DDL assumed from its notes:
-- tests/fixtures/legacy/queue_workflows.sql), in id order after %(after)s.
-- A plain SELECT on a read-only session: no lock a claim worker waits for.
SELECT j.id AS key, j.id::text AS old_id, j.status, j.queue, j.task_name AS task, j.args,
       j.attempts, j.max_attempts, j.available_at, j.error, j.created_at
FROM ingest_jobs j
WHERE j.status IN ('queued', 'running') AND j.id > %(after)s::bigint
ORDER BY j.id
LIMIT %(limit)s
