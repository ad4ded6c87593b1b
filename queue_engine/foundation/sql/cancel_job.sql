-- A queued job (or a waiting workflow node) is canceled at once; a running one
-- is asked to stop
-- (cancel_requested, seen by its worker's lease renewer, and a NOTIFY for a
-- faster wake). Returns the job after the change, or nothing if the job is
-- not active (the caller then reports why).
WITH upd AS (
    UPDATE __SCHEMA__.jobs j SET
        status = CASE WHEN j.status IN ('queued', 'waiting') THEN 'canceled' ELSE j.status END,
        finished_at = CASE WHEN j.status IN ('queued', 'waiting') THEN now() ELSE j.finished_at END,
        cancel_requested = true
    WHERE j.id = %(id)s AND j.status IN ('queued', 'waiting', 'running')
    RETURNING j.*
),
prior AS (
    SELECT id, status FROM __SCHEMA__.jobs WHERE id = %(id)s
),
ev AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
    SELECT upd.id,
           CASE WHEN upd.status = 'canceled' THEN 'canceled' ELSE 'cancel_requested' END,
           prior.status, upd.status, upd.attempt, %(message)s
    FROM upd JOIN prior ON prior.id = upd.id
),
wake AS (
    SELECT pg_notify(%(cancel_channel)s, upd.id::text) FROM upd WHERE upd.status = 'running'
)
SELECT upd.*, false AS created FROM upd CROSS JOIN (SELECT count(*) AS notified FROM wake) w
