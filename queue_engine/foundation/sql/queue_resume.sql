-- Resume a queue (`queue-ctl resume`): clear its paused flag and NOTIFY the
-- queue name on the jobs channel in the same transaction, so its idle workers
-- wake and claim at once instead of at their next poll. Upserts like
-- queue_pause. was_paused is read from the statement's snapshot, before the upsert.
-- The queue name is also NOTIFYed on the controls channel (workers that cache
-- their controls re-read them).
WITH prev AS (
    SELECT q.paused FROM __SCHEMA__.queues q WHERE q.name = %(queue)s
),
up AS (
    INSERT INTO __SCHEMA__.queues AS q (name, paused, paused_at, updated_at)
    VALUES (%(queue)s, false, NULL, now())
    ON CONFLICT (name) DO UPDATE SET
        paused = false,
        paused_at = NULL,
        updated_at = now()
    RETURNING q.name
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, up.name) FROM up
),
wake AS (
    SELECT pg_notify(%(jobs_channel)s, up.name) FROM up
)
SELECT coalesce((SELECT p.paused FROM prev p), false) AS was_paused,
       (SELECT count(*) FROM wake) AS notified,
       (SELECT count(*) FROM controls) AS controls_notified
