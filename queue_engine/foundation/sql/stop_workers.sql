-- Ask live workers to stop (`queue-ctl stop --host H [--queue Q] | --worker ID`):
-- each finishes its current job, gives back its prefetched ones and exits 0.
-- With %(now)s (`stop --now`, migration 0030) workers.stop_now is set too: a
-- busy worker reads it back with its next heartbeat and gives its running job
-- back at once (attempt not counted) instead of finishing it. A plain stop
-- after a --now one never clears the flag; a --now after a plain one adds it.
-- One-shot: it sets workers.stop_requested_at on the rows that match now, it
-- is not a rule for workers started later. A second request keeps the first
-- time (requested_before tells the caller it was already asked).
-- Live: role worker, not stopped, not flagged dead. A target is required: with
-- neither a worker id nor a host nothing matches, so a caller's bug can never
-- stop the whole fleet. NOTIFYs '*' on the controls channel in the same
-- transaction when any worker matched.
WITH target AS (
    SELECT w.id, w.host, w.queue, w.stop_requested_at AS requested_before,
           w.stop_now AS now_before
    FROM __SCHEMA__.workers w
    WHERE w.role = 'worker' AND w.stopped_at IS NULL AND w.flagged_dead_at IS NULL
      AND (%(worker_id)s::text IS NOT NULL OR %(host)s::text IS NOT NULL)
      AND (%(worker_id)s::text IS NULL OR w.id = %(worker_id)s::text)
      AND (%(host)s::text IS NULL OR w.host = %(host)s::text)
      AND (%(queue)s::text IS NULL OR w.queue = %(queue)s::text)
),
asked AS (
    UPDATE __SCHEMA__.workers w SET
        stop_requested_at = coalesce(t.requested_before, now()),
        stop_now = t.now_before OR %(now)s::boolean
    FROM target t
    WHERE w.id = t.id
      AND (t.requested_before IS NULL OR (%(now)s::boolean AND NOT t.now_before))
    RETURNING w.id, w.stop_requested_at
),
controls AS (
    SELECT pg_notify(%(controls_channel)s, '*') WHERE EXISTS (SELECT 1 FROM target)
)
SELECT t.id, t.host, t.queue, t.requested_before,
       coalesce(t.requested_before, (SELECT a.stop_requested_at FROM asked a WHERE a.id = t.id))
           AS stop_requested_at,
       (SELECT count(*) FROM controls) AS notified,
       t.now_before OR %(now)s::boolean AS stop_now,
       t.now_before
FROM target t
ORDER BY t.id
