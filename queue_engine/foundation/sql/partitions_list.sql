-- The partitions of a queue, deepest backlog first (`queue-ctl partitions list
-- QUEUE`, migration 0032): queued jobs, running jobs and weight of each.
--
-- Never a scan of jobs, whatever the backlog:
-- - the partitions with queued jobs come from a loose index scan of
--   jobs_partition_tag_idx (one probe per partition, in key order), stopped
--   after %(scan)s partitions; more_partitions says whether there were more;
-- - each one's queued jobs are counted through the same index, at most
--   %(cap)s (an index-only count that stops there; the caller shows "cap+");
-- - running jobs are counted from the running jobs of the queue (the partial
--   running-lease index: as many entries as the fleet runs jobs);
-- - the partitions with a weight set come from partition_weights.
WITH RECURSIVE keys AS (
    (SELECT j.partition_key AS key FROM __SCHEMA__.jobs j
     WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.partition_key IS NOT NULL
     ORDER BY j.partition_key LIMIT 1)
    UNION ALL
    SELECT (SELECT j.partition_key FROM __SCHEMA__.jobs j
            WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.partition_key IS NOT NULL
              AND j.partition_key > k.key
            ORDER BY j.partition_key LIMIT 1)
    FROM keys k
    WHERE k.key IS NOT NULL
),
visited AS MATERIALIZED (
    SELECT k.key FROM keys k WHERE k.key IS NOT NULL LIMIT %(scan)s + 1
),
depth AS (
    SELECT v.key,
           (SELECT count(*) FROM (
                SELECT 1 FROM __SCHEMA__.jobs d
                WHERE d.queue = %(queue)s AND d.partition_key = v.key AND d.status = 'queued'
                LIMIT %(cap)s) c) AS queued
    FROM (SELECT vv.key FROM visited vv ORDER BY vv.key LIMIT %(scan)s) v
),
running AS (
    SELECT r.partition_key AS key, count(*) AS running
    FROM __SCHEMA__.jobs r
    WHERE r.status = 'running' AND r.queue = %(queue)s AND r.partition_key IS NOT NULL
    GROUP BY r.partition_key
),
weights AS (
    SELECT w.partition_key AS key, w.weight, w.set_at
    FROM __SCHEMA__.partition_weights w
    WHERE w.queue = %(queue)s
)
SELECT key, coalesce(d.queued, 0) AS queued, coalesce(r.running, 0) AS running,
       w.weight, w.set_at,
       (SELECT count(*) > %(scan)s FROM visited) AS more_partitions
FROM depth d
FULL JOIN running r USING (key)
FULL JOIN weights w USING (key)
ORDER BY queued DESC, running DESC, key
LIMIT %(limit)s
