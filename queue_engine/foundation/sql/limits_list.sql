-- The operators' per-key limits (`queue-ctl limits list`): each key with a
-- concurrency limit, a rate, or both, with its running jobs now (one probe of
-- the running-key index per key, never a scan of jobs) and its bucket's
-- tokens now (refilled as the claim computes them; below 0 while a heavy job's
-- debt is repaid). set_at: the later of the two settings.
SELECT coalesce(c.key, b.key) AS key, c.max_running,
       (SELECT count(*) FROM __SCHEMA__.jobs r
        WHERE r.concurrency_key = coalesce(c.key, b.key) AND r.status = 'running') AS running,
       greatest(c.set_at, b.set_at) AS set_at,
       b.rate, b.burst,
       least(b.burst::double precision,
             b.tokens + b.rate * extract(epoch FROM clock_timestamp() - b.refilled_at)) AS tokens
FROM __SCHEMA__.concurrency_limits c
FULL JOIN __SCHEMA__.rate_buckets b ON b.key = c.key
ORDER BY 1
