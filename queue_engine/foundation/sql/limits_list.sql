-- The operators' concurrency limits (`queue-ctl limits list`), with each key's
-- running jobs now: one probe of the running-key index per limit (a limit has
-- at most its number of running jobs there), never a scan of jobs.
SELECT c.key, c.max_running,
       (SELECT count(*) FROM __SCHEMA__.jobs r
        WHERE r.concurrency_key = c.key AND r.status = 'running') AS running,
       c.set_at
FROM __SCHEMA__.concurrency_limits c
ORDER BY c.key
