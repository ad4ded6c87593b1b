-- Set a partition's fair-share weight in a queue (`queue-ctl partitions weight
-- QUEUE KEY W`, migration 0032): its jobs enqueued from now on are spaced
-- 1/W turns apart (weight 2: two claims for one of a weight-1 partition).
-- Jobs already queued keep the turns they were given. previous: the weight
-- it replaces, from the statement's snapshot (NULL: none set, weight 1).
-- queued: the partition's queued jobs in the queue now, at most %(cap)s
-- (through jobs_partition_tag_idx).
WITH prev AS (
    SELECT w.weight FROM __SCHEMA__.partition_weights w
    WHERE w.queue = %(queue)s AND w.partition_key = %(partition_key)s
),
up AS (
    INSERT INTO __SCHEMA__.partition_weights AS w (queue, partition_key, weight)
    VALUES (%(queue)s, %(partition_key)s, %(weight)s)
    ON CONFLICT (queue, partition_key) DO UPDATE SET weight = EXCLUDED.weight, set_at = now()
    RETURNING w.set_at
)
SELECT (SELECT p.weight FROM prev p) AS previous,
       (SELECT count(*) FROM (
            SELECT 1 FROM __SCHEMA__.jobs j
            WHERE j.queue = %(queue)s AND j.partition_key = %(partition_key)s
              AND j.status = 'queued'
            LIMIT %(cap)s) q) AS queued,
       (SELECT u.set_at FROM up u) AS set_at
