-- Revert the poison-jobs migration: give_back_jobs() gets back the body of
-- migration 0005 (no death count in its error and event texts).
CREATE OR REPLACE FUNCTION __SCHEMA__.give_back_jobs(
    p_ids bigint[],
    p_reasons text[],
    p_requeued_kind text,
    p_event_note text,
    p_jobs_channel text
)
RETURNS TABLE (
    id bigint,
    queue text,
    task text,
    status text,
    attempt integer,
    max_attempts integer,
    worker_id text,
    lease_expires_at timestamptz
)
LANGUAGE sql
VOLATILE
AS $$
WITH chosen AS MATERIALIZED (
    -- The worker and lease of each job before they are cleared (the rows are
    -- locked by the caller, so this is what it chose).
    SELECT j.id, c.reason, j.claimed_by, j.lease_expires_at
    FROM unnest(p_ids, p_reasons) AS c(id, reason)
    JOIN __SCHEMA__.jobs j ON j.id = c.id
),
upd AS (
    UPDATE __SCHEMA__.jobs j SET
        status = CASE
            WHEN j.cancel_requested THEN 'canceled'
            WHEN j.attempt >= j.max_attempts THEN 'lost'
            ELSE 'queued'
        END,
        available_at = CASE
            WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN j.available_at
            ELSE now()
        END,
        finished_at = CASE
            WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN now()
            ELSE NULL
        END,
        duration_ms = CASE
            WHEN j.cancel_requested OR j.attempt >= j.max_attempts
            THEN (extract(epoch FROM now() - j.started_at) * 1000)::bigint
            ELSE NULL
        END,
        error = CASE
            WHEN j.attempt >= j.max_attempts AND NOT j.cancel_requested
            THEN format('%s; attempts spent (%s of %s)', c.reason, j.attempt, j.max_attempts)
            ELSE j.error
        END,
        claimed_by = NULL,
        lease_expires_at = NULL
    FROM chosen c
    WHERE j.id = c.id AND j.status = 'running'
    RETURNING j.id, j.queue, j.task, j.status, j.attempt, j.max_attempts,
              c.reason, c.claimed_by AS worker_id, c.lease_expires_at
),
ev AS (
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT u.id,
           CASE u.status WHEN 'queued' THEN p_requeued_kind ELSE u.status END,
           'running', u.status, u.attempt, u.worker_id,
           format('%s%s; %s', u.reason, p_event_note,
                  CASE u.status
                      WHEN 'queued' THEN format('queued again (attempt %s of %s spent)',
                                                u.attempt, u.max_attempts)
                      WHEN 'lost' THEN format('lost: attempts spent (%s of %s)',
                                              u.attempt, u.max_attempts)
                      ELSE 'canceled: cancel was requested'
                  END)
    FROM upd u
),
wake AS (
    SELECT pg_notify(p_jobs_channel, q.queue)
    FROM (SELECT DISTINCT u.queue FROM upd u WHERE u.status = 'queued') q
)
SELECT u.id, u.queue, u.task, u.status, u.attempt, u.max_attempts, u.worker_id,
       u.lease_expires_at
-- An inner join, not LEFT JOIN ... ON true: the planner removes an unused left
-- join to a one-row subquery, and then the NOTIFYs would never be sent. (The
-- data-modifying CTEs upd and ev always run to completion.)
FROM upd u CROSS JOIN (SELECT count(*) AS notified FROM wake) w
ORDER BY u.id
$$;
