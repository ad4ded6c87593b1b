-- Reaper: give back running jobs whose lease expired (their worker died, hung
-- or lost the database), one bounded batch per statement.
--   * cancel requested      -> canceled (nobody wants it run again)
--   * attempts spent        -> lost     (finished, error says why)
--   * otherwise             -> queued   (available now, one NOTIFY per queue)
-- Each row gets a job_events row saying which lease expired and whose it was.
-- FOR UPDATE SKIP LOCKED: a job whose worker is finishing it right now is left
-- for the next sweep instead of waiting on (or clobbering) that finish; the
-- status guard in the UPDATE makes a concurrent finish win either way.
-- %(now)s pins the clock for tests; NULL means the database's now().
WITH expired AS MATERIALIZED (
    SELECT j.id, j.claimed_by, j.lease_expires_at
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'running'
      AND j.lease_expires_at < coalesce(%(now)s::timestamptz, now())
    ORDER BY j.lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
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
            THEN format('lease expired at %%s (worker %%s); attempts spent (%%s of %%s)',
                        to_char(e.lease_expires_at AT TIME ZONE 'UTC',
                                'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                        coalesce(e.claimed_by, 'unknown'), j.attempt, j.max_attempts)
            ELSE j.error
        END,
        claimed_by = NULL,
        lease_expires_at = NULL
    FROM expired e
    WHERE j.id = e.id AND j.status = 'running'
    RETURNING j.id, j.queue, j.task, j.status, j.attempt, j.max_attempts,
              e.claimed_by AS worker_id, e.lease_expires_at AS expired_at
),
ev AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT upd.id,
           CASE upd.status WHEN 'queued' THEN 'reaped' ELSE upd.status END,
           'running', upd.status, upd.attempt, upd.worker_id,
           format('lease expired at %%s (worker %%s); %%s',
                  to_char(upd.expired_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                  coalesce(upd.worker_id, 'unknown'),
                  CASE upd.status
                      WHEN 'queued' THEN format('queued again (attempt %%s of %%s spent)',
                                                upd.attempt, upd.max_attempts)
                      WHEN 'lost' THEN format('lost: attempts spent (%%s of %%s)',
                                              upd.attempt, upd.max_attempts)
                      ELSE 'canceled: cancel was requested'
                  END)
    FROM upd
),
wake AS (
    SELECT pg_notify(%(jobs_channel)s, q.queue)
    FROM (SELECT DISTINCT upd.queue FROM upd WHERE upd.status = 'queued') q
)
SELECT upd.id, upd.queue, upd.task, upd.status, upd.attempt, upd.max_attempts,
       upd.worker_id, upd.expired_at
-- An inner join, not LEFT JOIN ... ON true: the planner removes an unused left
-- join to a one-row subquery, and then the NOTIFYs would never be sent.
FROM upd CROSS JOIN (SELECT count(*) AS notified FROM wake) w
ORDER BY upd.id
