-- queue-ctl import --from dataloader: the next batch of unfinished jobs of
-- `dl_jobs` (the DDL assumed from its README: tests/fixtures/legacy/dataloader.sql),
-- in job_id order after %(after)s. A plain SELECT on a read-only session: no
-- lock a dataloader worker's claim (FOR UPDATE SKIP LOCKED) waits for, no
-- write. A job whose cancel was requested is left out: dataloader would end
-- it canceled at its next claim or checkpoint.
SELECT j.job_id AS key, j.job_id::text AS old_id, j.status, j.queue, j.task, j.args,
       j.idempotency_key, j.lock_key, j.partition_key, j.priority, j.available_at,
       j.attempt, j.max_attempts, j.lease_ttl_sec, j.producer, j.error, j.created_at
FROM dl_jobs j
WHERE j.status IN ('queued', 'running') AND NOT j.cancel_requested
  AND j.job_id > %(after)s::uuid
ORDER BY j.job_id
LIMIT %(limit)s
