-- Reaper: give back running jobs whose lease expired (their worker died, hung
-- or lost the database), one bounded batch per statement.
--   * cancel requested      -> canceled (nobody wants it run again)
--   * attempts spent        -> lost     (finished, error says why)
--   * otherwise             -> queued   (available now, one NOTIFY per queue)
-- Each row gets a job_events row saying which lease expired and whose it was.
-- The transition itself is give_back_jobs() (migrations 0005, 0006), shared with fast
-- recovery (sweep_gone_workers.sql); this statement chooses and locks the jobs.
-- FOR UPDATE SKIP LOCKED: a job whose worker is finishing it right now is left
-- for the next sweep instead of waiting on (or clobbering) that finish; the
-- status guard in the function's UPDATE makes a concurrent finish win either way.
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
batch AS (
    -- One call for the whole batch; both arrays are built in one pass, so in one order.
    -- The reason adds what the workers row says of the worker, when it is still
    -- there (read, not locked): gone (its session ended: fast recovery was off or
    -- had not run), stopped, flagged silent (hung), or when it last heartbeated.
    SELECT array_agg(e.id) AS ids,
           array_agg(format('lease expired at %%s (worker %%s%%s)',
                            to_char(e.lease_expires_at AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                            coalesce(e.claimed_by, 'unknown'),
                            CASE
                                WHEN w.id IS NULL THEN ''
                                WHEN w.state = 'gone' THEN ': gone, its database session ended'
                                WHEN w.stopped_at IS NOT NULL
                                THEN format(': %%s', w.state)
                                WHEN w.flagged_dead_at IS NOT NULL
                                THEN format(': silent for %%s s (flagged dead), hung or cut off',
                                            round(extract(epoch FROM
                                                coalesce(%(now)s::timestamptz, now())
                                                - w.heartbeat_at)::numeric, 1))
                                ELSE format(': last heartbeat %%s s before',
                                            round(extract(epoch FROM
                                                coalesce(%(now)s::timestamptz, now())
                                                - w.heartbeat_at)::numeric, 1))
                            END)) AS reasons
    FROM expired e
    LEFT JOIN __SCHEMA__.workers w ON w.id = e.claimed_by
)
SELECT g.id, g.queue, g.task, g.status, g.attempt, g.max_attempts,
       g.worker_id, g.lease_expires_at AS expired_at
FROM batch b
CROSS JOIN LATERAL __SCHEMA__.give_back_jobs(
    b.ids, b.reasons, 'reaped', '', %(jobs_channel)s) g
-- No call at all when no lease expired (the usual run): the function's body is
-- planned on each call.
WHERE b.ids IS NOT NULL
ORDER BY g.id
