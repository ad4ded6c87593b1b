-- Per-key flow figures (`queue-ctl stats`/`top`, `queue-ctl limits list`,
-- GET /api/v1/limits, the dashboard's Limits page, the metrics scrape): for
-- each key, the operator's limit, the effective limit, its running jobs and
-- its jobs waiting on the limit. Every read is bounded:
--   * running: jobs_running_concurrency_key_idx (one entry per running keyed
--     job, at most the sum of the limits), grouped by key;
--   * waiting: a due queued job of a key whose running count is at its
--     effective limit (the operator's, else the job's own concurrency_limit:
--     the claim's own rule, concurrency_free). No index finds a key's queued
--     jobs, so the figure is counted over the first %(cap)s + 1 due queued
--     jobs in jobs_claimable_idx order (QUEUE_ENGINE_STATS_EXACT_CAP), never
--     a scan of the whole backlog: exact below the cap, a lower bound above
--     it (waiting_at_least);
--   * keys: the concurrency_limits rows (operators' rows, a handful), plus,
--     when %(with_running)s, keys with running jobs but no operator's row.
-- %(key)s: only this key (NULL: every key). %(busiest)s: order by running +
-- waiting, most first (else by key). %(limit)s: at most this many keys.
-- A column for another per-key control (a rate bucket) goes into `keys` and
-- the final SELECT, and a field into operator/flow.py's KeyFlow.
WITH sample AS MATERIALIZED (
    SELECT j.concurrency_key, j.concurrency_limit
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'queued' AND j.available_at <= now()
    ORDER BY j.queue, j.priority, j.available_at, j.id
    LIMIT %(cap)s::bigint + 1
),
running AS MATERIALIZED (
    SELECT r.concurrency_key AS key, count(*) AS running,
           max(r.concurrency_limit) AS job_limit
    FROM __SCHEMA__.jobs r
    WHERE r.concurrency_key IS NOT NULL AND r.status = 'running'
      AND (%(key)s::text IS NULL OR r.concurrency_key = %(key)s::text)
    GROUP BY r.concurrency_key
),
keys AS (
    SELECT c.key, c.max_running, c.set_at
    FROM __SCHEMA__.concurrency_limits c
    WHERE %(key)s::text IS NULL OR c.key = %(key)s::text
    UNION ALL
    SELECT r.key, NULL::integer, NULL::timestamptz
    FROM running r
    WHERE %(with_running)s::boolean
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.concurrency_limits c WHERE c.key = r.key)
),
waits AS (
    SELECT s.concurrency_key AS key, count(*) AS waiting
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
           k.set_at
    FROM keys k
    LEFT JOIN running r ON r.key = k.key
    LEFT JOIN waits w ON w.key = k.key
)
SELECT f.key, f.operator_limit, f.effective_limit, f.running, f.waiting,
       (SELECT count(*) FROM sample) > %(cap)s::bigint AS waiting_at_least,
       f.set_at
FROM figures f
ORDER BY CASE WHEN %(busiest)s::boolean THEN -(f.running + f.waiting) ELSE 0 END, f.key
LIMIT %(limit)s::bigint
