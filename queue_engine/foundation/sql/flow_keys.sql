-- Per-key flow figures (`queue-ctl stats`/`top`, `queue-ctl limits list`,
-- GET /api/v1/limits, the dashboard's Limits page, the metrics scrape): for
-- each key, the operator's limit, the effective limit, its running jobs and
-- its jobs waiting on the limit. Every read is bounded:
--   * running: the running keyed jobs (one entry each in the partial indexes
--     of running jobs, at most the sum of the limits), grouped by key;
--   * waiting: a due queued job of a key whose running count is at its
--     effective limit (the operator's, else the job's own concurrency_limit:
--     the claim's own rule, concurrency_free). No index finds a key's queued
--     jobs, so they are counted over the first %(cap)s + 1 due jobs of each
--     queue in jobs_claimable_idx order (QUEUE_ENGINE_STATS_EXACT_CAP; the
--     queues found by a loose index scan, one probe each, as stats_queues.sql
--     does): never a scan of a whole backlog, the cost of `stats` per queue.
--     Exact when no queue's read stopped at the cap, else a lower bound for
--     the keys at their limit (waiting_at_least);
--   * keys: the keys operators set a limit or a rate for (concurrency_limits
--     full join rate_buckets: a handful of rows), plus, when
--     %(with_running)s, keys with running jobs but neither;
--   * tokens: a rated key's bucket now, refilled as the claim computes it
--     (concurrency_free, migration 0033); below 0 while a heavy job's debt is
--     repaid.
-- %(key)s: only this key (NULL: every key). %(busiest)s: order by running +
-- waiting, most first (else by key). %(limit)s: at most this many keys.
-- A column for another per-key control goes into `keys` and the final
-- SELECT, and a field into operator/flow.py's KeyFlow.
WITH RECURSIVE queues AS (
    -- The queues with queued jobs, by a loose scan of jobs_claimable_idx.
    (SELECT j.queue FROM __SCHEMA__.jobs j
     WHERE j.status = 'queued' ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT n.queue
    FROM queues c
    CROSS JOIN LATERAL (
        SELECT j.queue FROM __SCHEMA__.jobs j
        WHERE j.status = 'queued' AND j.queue > c.queue
        ORDER BY j.queue LIMIT 1
    ) n
),
run AS MATERIALIZED (
    SELECT r.queue, r.concurrency_key AS key, r.concurrency_limit
    FROM __SCHEMA__.jobs r
    WHERE r.concurrency_key IS NOT NULL AND r.status = 'running'
),
running AS MATERIALIZED (
    SELECT r.key, count(*) AS running, max(r.concurrency_limit) AS job_limit
    FROM run r
    WHERE %(key)s::text IS NULL OR r.key = %(key)s::text
    GROUP BY r.key
),
sample AS MATERIALIZED (
    -- Each queue's first due jobs, folded at once into counts per key and
    -- job limit (plain jobs: one row per queue, kept for the cap check).
    SELECT q.queue, s.concurrency_key, s.concurrency_limit, count(*) AS n
    FROM queues q
    CROSS JOIN LATERAL (
        SELECT j.concurrency_key, j.concurrency_limit
        FROM __SCHEMA__.jobs j
        WHERE j.status = 'queued' AND j.queue = q.queue AND j.available_at <= now()
        ORDER BY j.queue, j.priority, j.fair_tag NULLS FIRST, j.available_at, j.id
        LIMIT %(cap)s::bigint + 1
    ) s
    GROUP BY q.queue, s.concurrency_key, s.concurrency_limit
),
capped AS MATERIALIZED (
    SELECT count(*) > 0 AS any_capped
    FROM (SELECT 1 FROM sample GROUP BY queue HAVING sum(n) > %(cap)s::bigint) c
),
keys AS (
    SELECT coalesce(c.key, b.key) AS key, c.max_running,
           greatest(c.set_at, b.set_at) AS set_at, b.rate, b.burst,
           least(b.burst::float8,
                 b.tokens + b.rate * extract(epoch FROM clock_timestamp() - b.refilled_at))
               AS tokens
    FROM __SCHEMA__.concurrency_limits c
    FULL JOIN __SCHEMA__.rate_buckets b ON b.key = c.key
    WHERE %(key)s::text IS NULL OR coalesce(c.key, b.key) = %(key)s::text
    UNION ALL
    SELECT r.key, NULL::integer, NULL::timestamptz, NULL::float8, NULL::integer, NULL::float8
    FROM running r
    WHERE %(with_running)s::boolean
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.concurrency_limits c WHERE c.key = r.key)
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.rate_buckets b WHERE b.key = r.key)
),
waits AS (
    SELECT s.concurrency_key AS key, sum(s.n) AS waiting
    FROM sample s
    JOIN keys k ON k.key = s.concurrency_key
    LEFT JOIN running r ON r.key = s.concurrency_key
    WHERE coalesce(r.running, 0) >= coalesce(k.max_running, s.concurrency_limit)
    GROUP BY s.concurrency_key
),
figures AS (
    SELECT k.key, k.max_running AS operator_limit,
           coalesce(k.max_running, r.job_limit) AS effective_limit,
           coalesce(r.running, 0) AS running, coalesce(w.waiting, 0) AS waiting,
           k.set_at, k.rate, k.burst, k.tokens
    FROM keys k
    LEFT JOIN running r ON r.key = k.key
    LEFT JOIN waits w ON w.key = k.key
)
SELECT f.key, f.operator_limit, f.effective_limit, f.running, f.waiting,
       f.effective_limit IS NOT NULL AND f.running >= f.effective_limit
           AND (SELECT c.any_capped FROM capped c) AS waiting_at_least,
       f.set_at, f.rate, f.burst, f.tokens
FROM figures f
ORDER BY CASE WHEN %(busiest)s::boolean THEN -(f.running + f.waiting) ELSE 0 END, f.key
LIMIT %(limit)s::bigint
