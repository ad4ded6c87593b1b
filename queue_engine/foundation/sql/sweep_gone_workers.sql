-- Fast recovery (leader only): workers whose database session has ended are
-- gone (SIGKILL, crash, a host that died and whose TCP keepalive fired). Mark
-- them 'gone' and give back their running jobs now instead of when the lease
-- lapses, with the reaper's rules (give_back_jobs(), migrations 0005 and 0006):
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
-- A stopped worker is considered only while it still owns a running job: a
-- clean stop finishes or gives back its jobs first, so that one left with the
-- process (a handler that raised SystemExit, whose worker then stopped "cleanly");
-- its row keeps its state, and its jobs are given back like those of a gone one.
WITH gone AS MATERIALIZED (
    SELECT w.id, w.host, w.pid, w.backend_pid, w.heartbeat_at, w.rss_bytes, w.flagged_dead_at,
           w.stopped_at IS NOT NULL AS exited
    FROM __SCHEMA__.workers w
    WHERE w.role = 'worker'
      AND (w.stopped_at IS NULL
           -- One pass over the running jobs (their partial index), hashed.
           OR w.id IN (SELECT j.claimed_by FROM __SCHEMA__.jobs j WHERE j.status = 'running'))
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
        state = CASE WHEN g.exited THEN w.state ELSE 'gone' END,
        stopped_at = coalesce(w.stopped_at, now()),
        current_job_id = NULL
    FROM gone g
    WHERE w.id = g.id
    RETURNING w.id
),
orphaned AS MATERIALIZED (
    SELECT j.id, j.claimed_by, g.backend_pid, g.heartbeat_at, g.rss_bytes, g.flagged_dead_at,
           g.exited
    FROM __SCHEMA__.jobs j
    JOIN gone g ON g.id = j.claimed_by
    WHERE j.status = 'running'
    ORDER BY j.id
    FOR UPDATE OF j SKIP LOCKED
),
moved AS MATERIALIZED (
    -- The reaper's transition, give_back_jobs() (migrations 0005, 0006), for the
    -- whole batch; both arrays are built in one pass, so in one order. The reason
    -- says what the leader knows of the death (the process's exit signal or code
    -- is known only to its parent): the session's end, how long before it the
    -- worker last heartbeated, its RSS at that beat (an OOM kill hint), and
    -- whether it had been flagged silent first (a hang, then a kill).
    SELECT m.*
    FROM (SELECT array_agg(o.id) AS ids,
                 array_agg(format(
                     'worker %%s %%s: its database session ended (backend pid %%s; '
                     'last heartbeat %%s s before it was found gone%%s%%s)',
                     o.claimed_by,
                     CASE WHEN o.exited THEN 'stopped without finishing this job'
                          ELSE 'gone' END,
                     o.backend_pid,
                     round(extract(epoch FROM coalesce(%(now)s::timestamptz, now())
                                              - o.heartbeat_at)::numeric, 1),
                     ', rss ' || pg_size_pretty(o.rss_bytes),
                     CASE WHEN o.flagged_dead_at IS NOT NULL
                          THEN ', silent (flagged dead) before it ended' END)) AS reasons
          FROM orphaned o) b
    CROSS JOIN LATERAL __SCHEMA__.give_back_jobs(
        b.ids, b.reasons, 'recovered', ': job recovered without waiting for its lease',
        %(jobs_channel)s) m
    -- No call at all when nothing is orphaned (the usual run, every second): the
    -- function's body is planned on each call.
    WHERE b.ids IS NOT NULL
)
-- One row per gone worker, with the jobs moved (empty arrays: it held none).
-- count(*) reads moved whole whatever plan the join gets, so the jobs of every
-- gone worker are given back. (Data-modifying CTEs such as marked always run.)
SELECT g.id AS worker_id, g.host, g.pid, g.backend_pid,
       coalesce(array_agg(u.id ORDER BY u.id) FILTER (WHERE u.status = 'queued'),
                '{}'::bigint[]) AS requeued,
       coalesce(array_agg(u.id ORDER BY u.id) FILTER (WHERE u.status = 'lost'),
                '{}'::bigint[]) AS lost,
       coalesce(array_agg(u.id ORDER BY u.id) FILTER (WHERE u.status = 'canceled'),
                '{}'::bigint[]) AS canceled,
       coalesce(string_agg(DISTINCT u.queue, ',' ORDER BY u.queue), '') AS queues
FROM gone g
LEFT JOIN moved u ON u.worker_id = g.id
CROSS JOIN (SELECT count(*) AS given_back FROM moved) w
GROUP BY g.id, g.host, g.pid, g.backend_pid
ORDER BY g.id
