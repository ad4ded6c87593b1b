-- Per-queue figures of `queue-ctl stats`, the live view and the metrics scrape,
-- in one statement over three index-backed slices of the jobs table:
--   * queued rows (jobs_claimable_idx) and running rows (jobs_running_lease_idx),
--   * rows finished in the last hour (jobs_finished_at_idx).
-- A job created or started in the last 15 minutes is in one of those slices
-- (still active, or finished after it was created/started), so throughput in,
-- wait times and run times never need a scan of the whole table.
-- Definitions (docs/operations.md):
--   queued      status queued and available_at <= now (claimable now)
--   delayed     status queued and available_at > now (scheduled, or backing off)
--   wait        started_at - available_at of jobs started in the last 15 min
--               (not queued again since): time a claimable job waited for a worker
--   run         duration_ms of jobs that succeeded or failed in the last 15 min
--   in / out    jobs created / finished (any final status) in the window
--   paused      the queue's row in the queues table says paused
--   scale_limit at most this many workers of the queue claim (`queue-ctl scale`)
--   rate_limit  at most this many jobs started per second, in bursts of
--               rate_burst (`queue-ctl rate`); rate_burst is NULL without a rate
--   parked      live workers whose state is 'parked' (a park, or no scale slot);
--               they are counted in workers_live too
-- %(now)s pins the clock for tests; NULL: the database's now().
-- %(queue)s NULL: every queue.
WITH p AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now
),
backlog AS (
    -- Queued rows by queue, from jobs_claimable_idx alone: queue and available_at
    -- are its columns and status = 'queued' its predicate, so this is an
    -- index-only scan (no heap page is read for an all-visible row), in index
    -- order (no sort). A million-job backlog costs one pass over a narrow index,
    -- never over the table's rows: the plan once read every queued row's heap
    -- tuple (for created_at), which made `stats` take seconds at a million.
    SELECT j.queue,
        count(*) FILTER (WHERE j.available_at <= p.now) AS queued,
        count(*) FILTER (WHERE j.available_at > p.now) AS delayed,
        min(j.available_at) FILTER (WHERE j.available_at <= p.now) AS oldest_available_at
    FROM __SCHEMA__.jobs j CROSS JOIN p
    WHERE j.status = 'queued' AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
    GROUP BY j.queue
),
slice AS (
    -- Queued rows only for in_1m / in_15m: those due in the last 15 minutes or
    -- later (a job created in the window is due at its creation, or later when
    -- delayed); the condition on available_at is checked in jobs_claimable_idx
    -- before any heap page is read. (A job enqueued with a run_at already in
    -- the past is due before its creation and not counted in `in`.)
    SELECT j.queue, j.status, j.available_at, j.created_at, j.started_at, j.finished_at,
           j.duration_ms
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'queued' AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
      AND j.available_at > coalesce(%(now)s::timestamptz, now()) - interval '15 minutes'
      AND j.created_at > coalesce(%(now)s::timestamptz, now()) - interval '15 minutes'
    UNION ALL
    SELECT j.queue, j.status, j.available_at, j.created_at, j.started_at, j.finished_at,
           j.duration_ms
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'running' AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
    UNION ALL
    SELECT j.queue, j.status, j.available_at, j.created_at, j.started_at, j.finished_at,
           j.duration_ms
    FROM __SCHEMA__.jobs j
    WHERE j.finished_at >= coalesce(%(now)s::timestamptz, now()) - interval '1 hour'
      AND j.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
      AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
),
job_agg AS (
    SELECT s.queue,
        count(*) FILTER (WHERE s.status = 'running') AS running,
        count(*) FILTER (WHERE s.status = 'succeeded') AS succeeded_1h,
        count(*) FILTER (WHERE s.status = 'failed') AS failed_1h,
        count(*) FILTER (WHERE s.status = 'lost') AS lost_1h,
        count(*) FILTER (WHERE s.status = 'canceled') AS canceled_1h,
        count(*) FILTER (WHERE s.created_at > p.now - interval '1 minute'
                           AND s.created_at <= p.now) AS in_1m,
        count(*) FILTER (WHERE s.created_at > p.now - interval '15 minutes'
                           AND s.created_at <= p.now) AS in_15m,
        count(*) FILTER (WHERE s.finished_at > p.now - interval '1 minute'
                           AND s.finished_at <= p.now) AS out_1m,
        count(*) FILTER (WHERE s.finished_at > p.now - interval '15 minutes'
                           AND s.finished_at <= p.now) AS out_15m,
        percentile_cont(0.5) WITHIN GROUP (
            ORDER BY extract(epoch FROM s.started_at - s.available_at)::float8)
            FILTER (WHERE s.status <> 'queued' AND s.started_at > p.now - interval '15 minutes'
                      AND s.started_at <= p.now AND s.started_at >= s.available_at)
            AS wait_p50_s,
        percentile_cont(0.95) WITHIN GROUP (
            ORDER BY extract(epoch FROM s.started_at - s.available_at)::float8)
            FILTER (WHERE s.status <> 'queued' AND s.started_at > p.now - interval '15 minutes'
                      AND s.started_at <= p.now AND s.started_at >= s.available_at)
            AS wait_p95_s,
        count(*) FILTER (WHERE s.status <> 'queued' AND s.started_at > p.now - interval '15 minutes'
                           AND s.started_at <= p.now AND s.started_at >= s.available_at)
            AS wait_samples,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY (s.duration_ms / 1000.0)::float8)
            FILTER (WHERE s.status IN ('succeeded', 'failed') AND s.duration_ms IS NOT NULL
                      AND s.finished_at > p.now - interval '15 minutes'
                      AND s.finished_at <= p.now) AS run_p50_s,
        percentile_cont(0.95) WITHIN GROUP (ORDER BY (s.duration_ms / 1000.0)::float8)
            FILTER (WHERE s.status IN ('succeeded', 'failed') AND s.duration_ms IS NOT NULL
                      AND s.finished_at > p.now - interval '15 minutes'
                      AND s.finished_at <= p.now) AS run_p95_s,
        avg(s.duration_ms / 1000.0)
            FILTER (WHERE s.status IN ('succeeded', 'failed') AND s.duration_ms IS NOT NULL
                      AND s.finished_at > p.now - interval '15 minutes'
                      AND s.finished_at <= p.now)::float8 AS run_mean_s,
        count(*) FILTER (WHERE s.status IN ('succeeded', 'failed') AND s.duration_ms IS NOT NULL
                           AND s.finished_at > p.now - interval '15 minutes'
                           AND s.finished_at <= p.now) AS run_samples
    FROM slice s CROSS JOIN p
    GROUP BY s.queue, p.now
),
queue_agg AS (
    -- Every queue with queued, running or recently finished jobs.
    SELECT coalesce(b.queue, j.queue) AS queue,
        coalesce(b.queued, 0) AS queued, coalesce(b.delayed, 0) AS delayed,
        extract(epoch FROM p.now - b.oldest_available_at)::float8 AS oldest_queued_s,
        j.running, j.succeeded_1h, j.failed_1h, j.lost_1h, j.canceled_1h,
        j.in_1m, j.in_15m, j.out_1m, j.out_15m, j.wait_p50_s, j.wait_p95_s, j.wait_samples,
        j.run_p50_s, j.run_p95_s, j.run_mean_s, j.run_samples
    FROM backlog b
    FULL JOIN job_agg j ON j.queue = b.queue
    CROSS JOIN p
),
worker_agg AS (
    -- live: not stopped, not flagged, heartbeat fresher than %(dead_after_s)s;
    -- dead: flagged by the orchestrator, or not stopped with a stale heartbeat.
    SELECT w.queue,
        count(*) FILTER (WHERE w.stopped_at IS NULL AND w.flagged_dead_at IS NULL
                           AND w.heartbeat_at > p.now - make_interval(secs => %(dead_after_s)s::float8))
            AS workers_live,
        count(*) FILTER (WHERE w.stopped_at IS NULL AND w.flagged_dead_at IS NULL
                           AND w.heartbeat_at > p.now - make_interval(secs => %(dead_after_s)s::float8)
                           AND w.state = 'parked') AS workers_parked,
        count(*) FILTER (WHERE w.flagged_dead_at IS NOT NULL
                           OR (w.stopped_at IS NULL
                               AND w.heartbeat_at <= p.now - make_interval(secs => %(dead_after_s)s::float8)))
            AS workers_dead
    FROM __SCHEMA__.workers w CROSS JOIN p
    WHERE w.role = 'worker' AND w.queue IS NOT NULL
      AND (%(queue)s::text IS NULL OR w.queue = %(queue)s::text)
    GROUP BY w.queue, p.now
),
ctl AS (
    -- The queue's controls. A queue with a control in force (paused, scale or
    -- rate limited) is listed even with no jobs or workers; a row left at its
    -- defaults only adds its (default) figures to a queue listed anyway.
    SELECT q.name AS queue, q.paused, q.scale_limit, q.rate_limit,
           CASE WHEN q.rate_limit IS NOT NULL THEN q.rate_burst END AS rate_burst,
           (q.paused OR q.scale_limit IS NOT NULL OR q.rate_limit IS NOT NULL) AS in_force
    FROM __SCHEMA__.queues q
    WHERE %(queue)s::text IS NULL OR q.name = %(queue)s::text
)
SELECT coalesce(j.queue, w.queue, c.queue) AS queue,
       coalesce(j.queued, 0) AS queued, coalesce(j.delayed, 0) AS delayed,
       coalesce(j.running, 0) AS running,
       coalesce(j.succeeded_1h, 0) AS succeeded_1h, coalesce(j.failed_1h, 0) AS failed_1h,
       coalesce(j.lost_1h, 0) AS lost_1h, coalesce(j.canceled_1h, 0) AS canceled_1h,
       coalesce(j.in_1m, 0) AS in_1m, coalesce(j.in_15m, 0) AS in_15m,
       coalesce(j.out_1m, 0) AS out_1m, coalesce(j.out_15m, 0) AS out_15m,
       j.oldest_queued_s, j.wait_p50_s, j.wait_p95_s, coalesce(j.wait_samples, 0) AS wait_samples,
       j.run_p50_s, j.run_p95_s, j.run_mean_s, coalesce(j.run_samples, 0) AS run_samples,
       coalesce(w.workers_live, 0) AS workers_live,
       coalesce(w.workers_parked, 0) AS workers_parked,
       coalesce(w.workers_dead, 0) AS workers_dead,
       coalesce(c.paused, false) AS paused,
       c.scale_limit, c.rate_limit, c.rate_burst
FROM queue_agg j
FULL JOIN worker_agg w ON w.queue = j.queue
FULL JOIN ctl c ON c.queue = coalesce(j.queue, w.queue)
WHERE j.queue IS NOT NULL OR w.queue IS NOT NULL OR c.in_force
ORDER BY 1
