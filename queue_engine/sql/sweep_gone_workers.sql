-- Fast recovery (leader only): workers whose database session has ended are
-- gone (SIGKILL, crash, a host that died and whose TCP keepalive fired). Mark
-- them 'gone' and give back their running jobs now instead of when the lease
-- lapses, with the reaper's rules:
--   * cancel requested      -> canceled (nobody wants it run again)
--   * attempts spent        -> lost     (finished, error says why)
--   * otherwise             -> queued   (available now, one NOTIFY per queue)
-- A worker's session is its backend_pid, written when it registers (and again
-- after every reconnect). It is gone when no session with that pid exists
-- that started before the worker's last heartbeat: a newer session that
-- reuses the pid does not count. Not considered:
--   * rows heartbeated in the last %(min_age_s)s: a worker that has just
--     reconnected and re-registered must not be raced (FOR UPDATE re-checks
--     heartbeat_at on the row version it locks);
--   * rows last heartbeated before the server started: a Postgres restart
--     ended every session, which says nothing about the worker processes;
--     they re-register when they reconnect (the lease stays the fallback).
-- A backend_start hidden by pg_stat_activity (a role without
-- pg_read_all_stats looking at another role's session) counts as alive.
-- Behind a transaction-pooling pgbouncer backend_pid is a pooled server
-- connection and proves nothing: turn this sweep off there (the lease works).
WITH gone AS MATERIALIZED (
    SELECT w.id, w.host, w.pid, w.backend_pid
    FROM __SCHEMA__.workers w
    WHERE w.role = 'worker'
      AND w.stopped_at IS NULL
      AND w.backend_pid IS NOT NULL
      AND w.heartbeat_at < coalesce(%(now)s::timestamptz, now())
                           - make_interval(secs => %(min_age_s)s::float8)
      AND w.heartbeat_at > pg_postmaster_start_time()
      AND NOT EXISTS (
            SELECT 1 FROM pg_stat_activity a
            WHERE a.pid = w.backend_pid
              AND (a.backend_start IS NULL OR a.backend_start <= w.heartbeat_at))
    ORDER BY w.heartbeat_at
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED
),
marked AS (
    UPDATE __SCHEMA__.workers w SET
        state = 'gone',
        stopped_at = now(),
        current_job_id = NULL
    FROM gone g
    WHERE w.id = g.id
    RETURNING w.id
),
orphaned AS MATERIALIZED (
    SELECT j.id, j.claimed_by, g.backend_pid
    FROM __SCHEMA__.jobs j
    JOIN gone g ON g.id = j.claimed_by
    WHERE j.status = 'running'
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
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
            THEN format('worker %%s''s database session ended (backend pid %%s); '
                        'attempts spent (%%s of %%s)',
                        o.claimed_by, o.backend_pid, j.attempt, j.max_attempts)
            ELSE j.error
        END,
        claimed_by = NULL,
        lease_expires_at = NULL
    FROM orphaned o
    WHERE j.id = o.id AND j.status = 'running'
    RETURNING j.id, j.queue, j.task, j.status, j.attempt, j.max_attempts,
              o.claimed_by AS worker_id, o.backend_pid
),
ev AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT upd.id,
           CASE upd.status WHEN 'queued' THEN 'recovered' ELSE upd.status END,
           'running', upd.status, upd.attempt, upd.worker_id,
           format('worker %%s''s database session ended (backend pid %%s): job recovered '
                  'without waiting for its lease; %%s',
                  upd.worker_id, upd.backend_pid,
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
-- One row per gone worker, with the jobs moved (empty arrays: it held none).
-- CROSS JOIN, not an unused LEFT JOIN: the planner would drop it, and with it
-- the NOTIFYs. (Data-modifying CTEs such as marked and ev always run.)
SELECT g.id AS worker_id, g.host, g.pid, g.backend_pid,
       coalesce(array_agg(u.id ORDER BY u.id) FILTER (WHERE u.status = 'queued'),
                '{}'::bigint[]) AS requeued,
       coalesce(array_agg(u.id ORDER BY u.id) FILTER (WHERE u.status = 'lost'),
                '{}'::bigint[]) AS lost,
       coalesce(array_agg(u.id ORDER BY u.id) FILTER (WHERE u.status = 'canceled'),
                '{}'::bigint[]) AS canceled,
       coalesce(string_agg(DISTINCT u.queue, ',' ORDER BY u.queue), '') AS queues
FROM gone g
LEFT JOIN upd u ON u.worker_id = g.id
CROSS JOIN (SELECT count(*) AS notified FROM wake) w
GROUP BY g.id, g.host, g.pid, g.backend_pid
ORDER BY g.id
