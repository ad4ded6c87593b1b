-- queue-ctl import --from pqrun: the next batch of unfinished jobs of pqrun's
-- `jobs` table (its DDL: tests/fixtures/legacy/pqrun.sql), in id order after
-- %(after)s. A plain SELECT on a read-only session: it takes no lock a pqrun
-- worker waits for (its pickup's FOR UPDATE SKIP LOCKED is unaffected) and
-- writes nothing. READY covers new, delayed (run_after ahead) and reaped or
-- retried jobs; RUNNING ones come over as queued, their attempts counted.
SELECT j.id AS key, j.id::text AS old_id, j.status::text AS status, j.job_type AS task,
       j.payload AS args, j.priority, j.attempts, j.max_attempts, j.run_after,
       j.timeout_seconds, j.dedupe_key, j.last_error, j.created_at
FROM jobs j
WHERE j.status IN ('READY', 'RUNNING') AND j.id > %(after)s::bigint
ORDER BY j.id
LIMIT %(limit)s
