-- Put a failed, canceled, lost or skipped job back in its queue with fresh attempts.
-- Returns nothing if the job is in another status, or is a workflow's node (its
-- descendants were canceled with it: `retry_workflow` re-runs them together;
-- the caller reports why).
WITH prior AS (
    SELECT id, status FROM __SCHEMA__.jobs WHERE id = %(id)s
),
upd AS (
    UPDATE __SCHEMA__.jobs j SET
        status = 'queued',
        attempt = 0,
        available_at = now(),
        cancel_requested = false,
        claimed_by = NULL,
        lease_expires_at = NULL,
        heartbeat_at = NULL,
        started_at = NULL,
        finished_at = NULL,
        duration_ms = NULL,
        result = NULL
    WHERE j.id = %(id)s AND j.status IN ('failed', 'canceled', 'lost', 'skipped') AND j.workflow_id IS NULL
    RETURNING j.*
),
ev AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
    SELECT upd.id, 'retried', prior.status, 'queued', 0, %(message)s
    FROM upd JOIN prior ON prior.id = upd.id
),
wake AS (
    SELECT pg_notify(%(jobs_channel)s, upd.queue) FROM upd
)
SELECT upd.*, false AS created FROM upd CROSS JOIN (SELECT count(*) AS notified FROM wake) w
