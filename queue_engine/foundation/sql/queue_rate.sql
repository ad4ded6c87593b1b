-- Set or clear a queue's rate limit (`queue-ctl rate QUEUE R [--burst B] | off`):
-- at most %(rate)s jobs started per second, cluster-wide, in bursts of at most
-- %(burst)s (the token bucket of take_rate_tokens); NULL: no limit (the burst is
-- then back to its default, 1). Upserts like queue_pause.
-- A new rate or burst resets the bucket to full (rate_tokens NULL means a full
-- burst, refilled from now). Setting the same rate and burst again keeps the
-- bucket as it is, so re-running the command never grants an extra burst.
-- In the same transaction it NOTIFYs the queue name on the controls channel
-- (workers re-read their controls) and on the jobs channel (a full bucket or no
-- limit may let idle workers claim now). previous_* come from the statement's
-- snapshot, before the upsert.
WITH prev AS (
    SELECT q.rate_limit, q.rate_burst FROM __SCHEMA__.queues q WHERE q.name = %(queue)s
),
up AS (
    INSERT INTO __SCHEMA__.queues AS q
        (name, rate_limit, rate_burst, rate_tokens, rate_refilled_at, updated_at)
    VALUES (%(queue)s, %(rate)s::float8, %(burst)s::integer, NULL,
            CASE WHEN %(rate)s::float8 IS NULL THEN NULL ELSE now() END, now())
    ON CONFLICT (name) DO UPDATE SET
        rate_limit = EXCLUDED.rate_limit,
        rate_burst = EXCLUDED.rate_burst,
        rate_tokens = CASE WHEN q.rate_limit = EXCLUDED.rate_limit
                            AND q.rate_burst = EXCLUDED.rate_burst
                           THEN q.rate_tokens END,
        rate_refilled_at = CASE WHEN q.rate_limit = EXCLUDED.rate_limit
                                 AND q.rate_burst = EXCLUDED.rate_burst
                                THEN q.rate_refilled_at
                                ELSE EXCLUDED.rate_refilled_at END,
        updated_at = now()
    RETURNING q.name
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, up.name) FROM up
),
wake AS (
    SELECT pg_notify(%(jobs_channel)s, up.name) FROM up
)
SELECT (SELECT p.rate_limit FROM prev p) AS previous_rate,
       (SELECT CASE WHEN p.rate_limit IS NOT NULL THEN p.rate_burst END FROM prev p)
           AS previous_burst,
       (SELECT count(*) FROM controls) AS notified,
       (SELECT count(*) FROM wake) AS woken
