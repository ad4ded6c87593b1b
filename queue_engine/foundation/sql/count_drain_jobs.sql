-- What queue_engine.testing.drain still has to wait for on one queue, in one snapshot:
-- due jobs (queued, available now), running ones (claimed, outcome not yet written)
-- and delayed ones (queued for later: retries, snoozes, run_at).
-- A claim moves a job from due to running atomically, so "none due, none running"
-- read here cannot miss a job a worker is about to run.
SELECT
    count(*) FILTER (WHERE j.status = 'queued' AND j.available_at <= now()) AS due,
    count(*) FILTER (WHERE j.status = 'running') AS running,
    count(*) FILTER (WHERE j.status = 'queued' AND j.available_at > now()) AS delayed
FROM __SCHEMA__.jobs j
WHERE j.queue = %(queue)s
