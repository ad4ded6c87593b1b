-- Set or clear a queue's scale limit (`queue-ctl scale QUEUE N|off`): at most
-- %(limit)s workers of the queue claim, cluster-wide; NULL: no limit. Upserts
-- like queue_pause, so a queue without a row (or without jobs) can be limited
-- too. In the same transaction it NOTIFYs the queue name on the controls
-- channel, so workers re-check their slot at once rather than at their next
-- heartbeat, and, when the limit went up or away, on the jobs channel too, so
-- idle workers that may now claim do so at once (as resume does). previous is
-- read from the statement's snapshot, before the upsert.
WITH prev AS (
    SELECT q.scale_limit FROM __SCHEMA__.queues q WHERE q.name = %(queue)s
),
up AS (
    INSERT INTO __SCHEMA__.queues AS q (name, scale_limit, updated_at)
    VALUES (%(queue)s, %(limit)s::integer, now())
    ON CONFLICT (name) DO UPDATE SET
        scale_limit = EXCLUDED.scale_limit,
        updated_at = now()
    RETURNING q.name
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, up.name) FROM up
),
wake AS (
    -- Up from a limit, or no limit any more. A comparison with no previous
    -- limit is NULL: going from unlimited to N is scaling down.
    SELECT pg_notify(%(jobs_channel)s, up.name) FROM up
    WHERE %(limit)s::integer IS NULL
       OR %(limit)s::integer > (SELECT p.scale_limit FROM prev p)
)
SELECT (SELECT p.scale_limit FROM prev p) AS previous,
       (SELECT count(*) FROM controls) AS notified,
       (SELECT count(*) FROM wake) AS woken
