-- Pause a queue (`queue-ctl pause`): its workers claim nothing from their next
-- claim on; running jobs finish normally. Upserts the queue's control row, so a
-- queue that has no row yet (or no jobs yet) can be paused too. Pausing a paused
-- queue keeps its original paused_at. was_paused is read from the statement's
-- snapshot, before the upsert. The queue name is NOTIFYed on the controls
-- channel in the same transaction, so workers that cache their controls re-read
-- them at once.
WITH prev AS (
    SELECT q.paused FROM __SCHEMA__.queues q WHERE q.name = %(queue)s
),
up AS (
    INSERT INTO __SCHEMA__.queues AS q (name, paused, paused_at, updated_at)
    VALUES (%(queue)s, true, now(), now())
    ON CONFLICT (name) DO UPDATE SET
        paused = true,
        paused_at = CASE WHEN q.paused THEN q.paused_at ELSE now() END,
        updated_at = now()
    RETURNING q.name, q.paused_at
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, up.name) FROM up
)
SELECT up.paused_at, coalesce((SELECT p.paused FROM prev p), false) AS was_paused,
       (SELECT count(*) FROM controls) AS notified
FROM up
