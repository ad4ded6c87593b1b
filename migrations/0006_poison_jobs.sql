-- queue-engine: poison jobs. give_back_jobs() (migration 0005) counts the deaths.
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- A job whose handler kills its process every time (a segfault, os._exit, an
-- OOM kill) already stops after max_attempts: the claim spends an attempt, and
-- give_back_jobs() ends the job 'lost' when the attempt that ended was the last.
-- What was missing is the why: the error said only how the last attempt ended.
-- Now each give-back counts the attempts of this job that ended the same way
-- (its earlier 'recovered' and 'reaped' events, since the last operator
-- 'retried', plus this one) and says so, on the job and on the event:
--
--   error:   the worker process died 3 times while running this job (its
--            database session ended each time); last: <reason>[; attempts spent (3 of 3)]
--   event:   <reason><note>; the worker process died 3 times while running
--            this job (...); lost: attempts spent (3 of 3)
--
-- A requeue now writes that error too (the job's last error is the death; the
-- finish of a later attempt overwrites it, with NULL on success); a canceled
-- job keeps its error. The count needs no column: job_events_job_id_idx finds a
-- job's events, and they live as long as the job. "Died" is what the engine
-- can see: a 'recovered' give-back means the worker's database session ended
-- (its process exited, was killed, or its connection was cut); a 'reaped' one
-- means its lease expired (dead, hung, or cut off from the database), and the
-- text names which. The exit signal or code is known only to the process's
-- parent (systemd, queue-ctl up, a shell): the orchestrator is another process.
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
    -- locked by the caller, so this is what it chose), and how many earlier
    -- attempts of this run of the job ended by a give-back, by kind.
    SELECT j.id, c.reason, j.claimed_by, j.lease_expires_at,
           d.ended + CASE WHEN p_requeued_kind = 'recovered' THEN 1 ELSE 0 END AS ended,
           d.expired + CASE WHEN p_requeued_kind = 'recovered' THEN 0 ELSE 1 END AS expired
    FROM unnest(p_ids, p_reasons) AS c(id, reason)
    JOIN __SCHEMA__.jobs j ON j.id = c.id
    CROSS JOIN LATERAL (
        SELECT count(*) FILTER (WHERE e.kind = 'recovered') AS ended,
               count(*) FILTER (WHERE e.kind = 'reaped') AS expired
        FROM __SCHEMA__.job_events e
        WHERE e.job_id = j.id
          AND e.kind IN ('recovered', 'reaped')
          -- An operator's retry starts the count again (attempt 0).
          AND e.id > coalesce((SELECT max(r.id) FROM __SCHEMA__.job_events r
                               WHERE r.job_id = j.id AND r.kind = 'retried'), 0)
    ) d
),
counted AS MATERIALIZED (
    SELECT ch.*,
           format('the worker process died %s while running this job (%s)',
                  CASE ch.ended + ch.expired
                      WHEN 1 THEN 'once' WHEN 2 THEN 'twice'
                      ELSE (ch.ended + ch.expired) || ' times' END,
                  CASE
                      WHEN ch.expired = 0 THEN
                          'its database session ended'
                          || CASE WHEN ch.ended > 1 THEN ' each time' ELSE '' END
                      WHEN ch.ended = 0 THEN
                          'its lease expired'
                          || CASE WHEN ch.expired > 1 THEN ' each time' ELSE '' END
                          || ': dead, hung or cut off from the database'
                      ELSE format('database session ended %s, lease expired %s',
                                  CASE ch.ended WHEN 1 THEN 'once' WHEN 2 THEN 'twice'
                                      ELSE ch.ended || ' times' END,
                                  CASE ch.expired WHEN 1 THEN 'once' WHEN 2 THEN 'twice'
                                      ELSE ch.expired || ' times' END)
                  END) AS deaths
    FROM chosen ch
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
            WHEN j.cancel_requested THEN j.error
            WHEN j.attempt >= j.max_attempts
            THEN format('%s; last: %s; attempts spent (%s of %s)',
                        c.deaths, c.reason, j.attempt, j.max_attempts)
            ELSE format('%s; last: %s', c.deaths, c.reason)
        END,
        claimed_by = NULL,
        lease_expires_at = NULL
    FROM counted c
    WHERE j.id = c.id AND j.status = 'running'
    RETURNING j.id, j.queue, j.task, j.status, j.attempt, j.max_attempts,
              c.reason, c.deaths, c.claimed_by AS worker_id, c.lease_expires_at
),
ev AS (
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT u.id,
           CASE u.status WHEN 'queued' THEN p_requeued_kind ELSE u.status END,
           'running', u.status, u.attempt, u.worker_id,
           format('%s%s; %s; %s', u.reason, p_event_note, u.deaths,
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
