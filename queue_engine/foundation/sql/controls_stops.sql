-- Pending stop requests, for `queue-ctl controls`: workers asked to stop
-- (`queue-ctl stop`) that have not stopped yet and were not flagged dead;
-- stop_now: a hard stop (`stop --now`, migration 0030).
SELECT w.id AS worker_id, w.host, w.queue, w.state, w.stop_requested_at, w.stop_now
FROM __SCHEMA__.workers w
WHERE w.stop_requested_at IS NOT NULL AND w.stopped_at IS NULL AND w.flagged_dead_at IS NULL
ORDER BY w.stop_requested_at, w.id
