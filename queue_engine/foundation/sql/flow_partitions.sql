-- The top partitions (`partition_key`) of one queue by depth, with their
-- running jobs (`queue-ctl stats`/`top`, GET /api/v1/partitions, the queue
-- page's "Top partitions" panel, the metrics scrape). Bounded reads only:
--   * queued: the queue's first %(cap)s + 1 due partitioned jobs in
--     jobs_claimable_idx order (QUEUE_ENGINE_STATS_EXACT_CAP), grouped by
--     partition: exact below the cap, lower bounds above it (queued_at_least;
--     the partitions nearest the head of the queue are the ones read). Plain
--     jobs come first in each priority of that index (fair_tag NULLS FIRST):
--     the read starts past them in each priority (found by a loose index
--     scan, one probe each), so a plain backlog deeper than the cap hides no
--     partition. Partitioned jobs queued before migration 0032 have no turn
--     (the claim takes them as plain jobs) and are not counted;
--   * running: the queue's running jobs (jobs_running_lease_idx: one entry
--     per running job, bounded by the fleet's size).
-- Jobs without a partition key are not a partition and are not listed.
-- %(limit)s: at most this many partitions, deepest first.
-- A column for another per-partition figure (a weight) is joined in the final
-- SELECT, with a field in operator/flow.py's PartitionFlow.
WITH RECURSIVE prios AS (
    (SELECT j.priority FROM __SCHEMA__.jobs j
     WHERE j.status = 'queued' AND j.queue = %(queue)s::text
     ORDER BY j.queue, j.priority LIMIT 1)
    UNION ALL
    SELECT n.priority
    FROM prios c
    CROSS JOIN LATERAL (
        SELECT j.priority FROM __SCHEMA__.jobs j
        WHERE j.status = 'queued' AND j.queue = %(queue)s::text AND j.priority > c.priority
        ORDER BY j.queue, j.priority LIMIT 1
    ) n
),
sample AS MATERIALIZED (
    SELECT s.partition_key
    FROM prios pr
    CROSS JOIN LATERAL (
        SELECT j.partition_key
        FROM __SCHEMA__.jobs j
        WHERE j.status = 'queued' AND j.queue = %(queue)s::text AND j.priority = pr.priority
          AND j.fair_tag IS NOT NULL AND j.available_at <= now()
        ORDER BY j.fair_tag NULLS FIRST, j.available_at, j.id
        LIMIT %(cap)s::bigint + 1
    ) s
    LIMIT %(cap)s::bigint + 1
),
queued AS (
    SELECT s.partition_key, count(*) AS queued
    FROM sample s
    WHERE s.partition_key IS NOT NULL
    GROUP BY s.partition_key
),
running AS (
    SELECT r.partition_key, count(*) AS running
    FROM __SCHEMA__.jobs r
    WHERE r.status = 'running' AND r.queue = %(queue)s::text AND r.partition_key IS NOT NULL
    GROUP BY r.partition_key
)
SELECT coalesce(q.partition_key, r.partition_key) AS partition_key,
       coalesce(q.queued, 0) AS queued, coalesce(r.running, 0) AS running,
       (SELECT count(*) FROM sample) > %(cap)s::bigint AS queued_at_least
FROM queued q
FULL JOIN running r ON r.partition_key = q.partition_key
ORDER BY 2 DESC, 3 DESC, 1
LIMIT %(limit)s::bigint
