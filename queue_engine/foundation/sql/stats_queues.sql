-- Per-queue figures of `queue-ctl stats`, the live view and the metrics scrape,
-- in one statement whose every read is bounded by %(cap)s (the
-- QUEUE_ENGINE_STATS_EXACT_CAP setting), whatever the size of the jobs table:
--   * the backlog of plain jobs is counted from jobs_claimable_idx alone
--     (index-only), per (queue, priority) range, at most %(cap)s + 1 entries per
--     range and figure; partitioned jobs (fair_tag set), ordered by their turn
--     in that index, are read once per range, at most %(cap)s + 1 rows;
--   * running rows come from jobs_running_lease_idx (as many as running jobs);
--   * finished rows: the newest %(cap)s + 1 of the last hour from
--     jobs_finished_at_idx; queued rows for `in`: the newest %(cap)s + 1 due in
--     the last 15 minutes per (queue, priority) range.
-- Below the cap every figure is exact (as before). Where a read stops at its
-- cap, the figure is not exact and the statement says so:
--   * queued_capped / delayed_capped: ranges whose count stopped at the cap
--     (the count is then a lower bound; stats.py turns it into an estimate from
--     the planner's statistics, see sql/estimate_backlog.sql);
--   * finished_from: the finished_at of the oldest finished row read when that
--     read stopped at its cap (NULL: the whole hour was read). Figures of a window
--     reaching further back are extrapolated from the span read (count x window
--     / span) and listed in `estimated`; percentiles are those of the rows read;
--   * in_1m / in_15m are listed in `at_least` when a queued read stopped at its
--     cap before the start of their window (a lower bound), both when a
--     partitioned read stopped at its cap; oldest_queued_s then too.
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
WITH RECURSIVE p AS MATERIALIZED (
    SELECT coalesce(%(now)s::timestamptz, now()) AS now, %(cap)s::bigint AS cap
),
parts AS (
    -- The (queue, priority) ranges of jobs_claimable_idx, by a loose index scan:
    -- one index probe per range, however many entries each holds. Within a
    -- range the index is ordered by available_at, so due and delayed entries
    -- are two contiguous runs that can be counted up to a cap.
    (SELECT j.queue, j.priority
     FROM __SCHEMA__.jobs j
     WHERE j.status = 'queued' AND j.queue >= coalesce(%(queue)s::text, '')
     ORDER BY j.queue, j.priority
     LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority
    FROM parts c
    CROSS JOIN LATERAL (
        SELECT j.queue, j.priority
        FROM __SCHEMA__.jobs j
        WHERE j.status = 'queued' AND (j.queue, j.priority) > (c.queue, c.priority)
        ORDER BY j.queue, j.priority
        LIMIT 1
    ) n
    WHERE %(queue)s::text IS NULL OR c.queue = %(queue)s::text
),
part_read AS MATERIALIZED (
    -- Partitioned jobs (fair_tag set, migration 0032) sit after a range's plain
    -- jobs in jobs_claimable_idx and are ordered by their turn, not by
    -- available_at: no index range holds their due or their newest ones. So
    -- each range's first cap + 1 of them are read once, in index order (the
    -- next turns, usually the oldest), and every figure takes its share of
    -- them from this read: exact when it held them all (part_n <= cap), else
    -- the figures it feeds are marked (queued/delayed capped, oldest_queued_s
    -- and in_* lower bounds). A queue without partitioned jobs pays one probe.
    SELECT pt.queue, pt.priority, x.available_at, x.created_at,
           count(*) OVER (PARTITION BY pt.queue, pt.priority) AS part_n
    FROM parts pt CROSS JOIN p
    CROSS JOIN LATERAL (
        SELECT j.available_at, j.created_at
        FROM __SCHEMA__.jobs j
        WHERE j.status = 'queued' AND j.queue = pt.queue AND j.priority = pt.priority
          AND j.fair_tag IS NOT NULL
        ORDER BY j.fair_tag NULLS FIRST, j.available_at, j.id
        LIMIT p.cap + 1
    ) x
    WHERE %(queue)s::text IS NULL OR pt.queue = %(queue)s::text
),
ranges AS MATERIALIZED (
    -- Plain jobs (fair_tag NULL) come first in each range, by available_at:
    -- their due and delayed entries are two contiguous runs, each counted up
    -- to the cap, and the first is the oldest. The partitioned jobs' share
    -- comes from part_read.
    SELECT pt.queue, pt.priority,
        (SELECT count(*) FROM (
            SELECT 1 FROM __SCHEMA__.jobs j
            WHERE j.status = 'queued' AND j.queue = pt.queue AND j.priority = pt.priority
              AND j.fair_tag IS NULL AND j.available_at <= p.now
            ORDER BY j.fair_tag NULLS FIRST, j.available_at
            LIMIT p.cap + 1) x) AS queued,
        (SELECT count(*) FROM (
            SELECT 1 FROM __SCHEMA__.jobs j
            WHERE j.status = 'queued' AND j.queue = pt.queue AND j.priority = pt.priority
              AND j.fair_tag IS NULL AND j.available_at > p.now
            ORDER BY j.fair_tag NULLS FIRST, j.available_at
            LIMIT p.cap + 1) x) AS delayed,
        (SELECT j.available_at FROM __SCHEMA__.jobs j
         WHERE j.status = 'queued' AND j.queue = pt.queue AND j.priority = pt.priority
           AND j.fair_tag IS NULL
         ORDER BY j.fair_tag NULLS FIRST, j.available_at
         LIMIT 1) AS first_available_at,
        coalesce(pr.queued, 0) AS part_queued, coalesce(pr.delayed, 0) AS part_delayed,
        pr.first_due AS part_first_due, coalesce(pr.n > p.cap, false) AS part_capped
    FROM parts pt CROSS JOIN p
    LEFT JOIN LATERAL (
        SELECT count(*) FILTER (WHERE r.available_at <= p.now) AS queued,
               count(*) FILTER (WHERE r.available_at > p.now) AS delayed,
               min(r.available_at) FILTER (WHERE r.available_at <= p.now) AS first_due,
               max(r.part_n) AS n
        FROM part_read r
        WHERE r.queue = pt.queue AND r.priority = pt.priority
    ) pr ON true
    WHERE %(queue)s::text IS NULL OR pt.queue = %(queue)s::text
),
backlog AS (
    -- Per queue: the counts (each plain range's count stops at cap + 1, so
    -- the sum is exact when no read reached the cap, else a lower bound), how
    -- many ranges reached the cap (a partitioned read that stopped there
    -- leaves both its due and delayed counts open), and the oldest due job:
    -- exact from the first plain entry of each range and the partitioned
    -- reads, a lower bound of the age when a partitioned read stopped at the
    -- cap.
    SELECT r.queue,
        sum(r.queued + r.part_queued)::bigint AS queued,
        sum(r.delayed + r.part_delayed)::bigint AS delayed,
        count(*) FILTER (WHERE r.queued > p.cap OR r.part_capped) AS queued_capped,
        count(*) FILTER (WHERE r.delayed > p.cap OR r.part_capped) AS delayed_capped,
        least(min(r.first_available_at) FILTER (WHERE r.first_available_at <= p.now),
              min(r.part_first_due)) AS oldest_available_at,
        bool_or(r.part_capped) AS part_capped
    FROM ranges r CROSS JOIN p
    GROUP BY r.queue
),
fin AS MATERIALIZED (
    -- The newest cap + 1 jobs finished in the last hour (jobs_finished_at_idx,
    -- read backwards: at most cap + 1 heap rows, however busy the hour was).
    SELECT j.queue, j.status, j.available_at, j.created_at, j.started_at, j.finished_at,
           j.duration_ms
    FROM __SCHEMA__.jobs_all j
    WHERE j.finished_at >= coalesce(%(now)s::timestamptz, now()) - interval '1 hour'
      AND j.finished_at IS NOT NULL
      AND j.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped')
    ORDER BY j.finished_at DESC
    LIMIT %(cap)s::bigint + 1
),
fin_cover AS (
    -- finished_from: NULL when the read held the whole hour, else the oldest
    -- finished_at read (the rows at that instant are left out, so the span read,
    -- finished_from to now, is complete).
    SELECT CASE WHEN count(*) > p.cap THEN min(f.finished_at) END AS finished_from
    FROM fin f CROSS JOIN p
    GROUP BY p.cap
),
recent_queued AS MATERIALIZED (
    -- Queued rows for in_1m / in_15m: per range, the newest cap + 1 plain jobs
    -- due in the last 15 minutes or later (a job created in the window is due
    -- at its creation, or later when delayed; a job enqueued with a run_at
    -- already in the past is due before its creation and not counted in
    -- `in`), read backwards in index order; and the partitioned jobs of
    -- part_read, under the same rule (n = 0: always counted).
    SELECT r.queue, q.created_at, q.available_at, q.n, p.cap
    FROM ranges r CROSS JOIN p
    CROSS JOIN LATERAL (
        SELECT j.created_at, j.available_at,
               row_number() OVER (ORDER BY j.fair_tag DESC NULLS LAST,
                                       j.available_at DESC) AS n
        FROM (
            SELECT j.created_at, j.available_at, j.fair_tag
            FROM __SCHEMA__.jobs j
            WHERE j.status = 'queued' AND j.queue = r.queue AND j.priority = r.priority
              AND j.fair_tag IS NULL AND j.available_at > p.now - interval '15 minutes'
            ORDER BY j.fair_tag DESC NULLS LAST, j.available_at DESC
            LIMIT p.cap + 1
        ) j
    ) q
    UNION ALL
    SELECT pr.queue, pr.created_at, pr.available_at, 0, p.cap
    FROM part_read pr CROSS JOIN p
    WHERE pr.available_at > p.now - interval '15 minutes'
),
queued_cover AS (
    -- Per queue: the earliest available_at of a plain read that stopped at its
    -- cap, or now when a partitioned read did (it is not in available_at
    -- order: every window may miss jobs). NULL: every read was complete. `in`
    -- of a window starting before it is a lower bound.
    SELECT b.queue,
           greatest(max(rq.available_at) FILTER (WHERE rq.n > rq.cap),
                    CASE WHEN b.part_capped THEN p.now END) AS queued_from
    FROM backlog b CROSS JOIN p
    LEFT JOIN recent_queued rq ON rq.queue = b.queue
    GROUP BY b.queue, b.part_capped, p.now
),
slice AS (
    SELECT rq.queue, 'queued'::text AS status, rq.available_at, rq.created_at,
           NULL::timestamptz AS started_at, NULL::timestamptz AS finished_at,
           NULL::bigint AS duration_ms
    FROM recent_queued rq
    WHERE rq.n <= rq.cap
      AND rq.created_at > coalesce(%(now)s::timestamptz, now()) - interval '15 minutes'
    UNION ALL
    SELECT j.queue, j.status, j.available_at, j.created_at, j.started_at, j.finished_at,
           j.duration_ms
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'running' AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
    UNION ALL
    SELECT f.queue, f.status, f.available_at, f.created_at, f.started_at, f.finished_at,
           f.duration_ms
    FROM fin f CROSS JOIN fin_cover c
    WHERE (c.finished_from IS NULL OR f.finished_at > c.finished_from)
      AND (%(queue)s::text IS NULL OR f.queue = %(queue)s::text)
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
cover AS (
    -- How far back the finished read reaches, as a factor per window: 1 when
    -- the read holds the whole window (exact), else window / span read, by
    -- which the window's counts are extrapolated.
    SELECT
        CASE WHEN c.finished_from IS NULL OR c.finished_from <= p.now - interval '1 minute'
             THEN 1.0 ELSE 60.0 / greatest(extract(epoch FROM p.now - c.finished_from)::float8, 0.001)
        END AS k_1m,
        CASE WHEN c.finished_from IS NULL OR c.finished_from <= p.now - interval '15 minutes'
             THEN 1.0 ELSE 900.0 / greatest(extract(epoch FROM p.now - c.finished_from)::float8, 0.001)
        END AS k_15m,
        CASE WHEN c.finished_from IS NULL OR c.finished_from <= p.now - interval '1 hour'
             THEN 1.0 ELSE 3600.0 / greatest(extract(epoch FROM p.now - c.finished_from)::float8, 0.001)
        END AS k_1h
    FROM p LEFT JOIN fin_cover c ON true
),
queue_agg AS (
    -- Every queue with queued, running or recently finished jobs.
    SELECT coalesce(b.queue, j.queue) AS queue,
        coalesce(b.queued, 0) AS queued, coalesce(b.delayed, 0) AS delayed,
        coalesce(b.queued_capped, 0) AS queued_capped,
        coalesce(b.delayed_capped, 0) AS delayed_capped,
        extract(epoch FROM p.now - b.oldest_available_at)::float8 AS oldest_queued_s,
        j.running,
        round(j.succeeded_1h * k.k_1h)::bigint AS succeeded_1h,
        round(j.failed_1h * k.k_1h)::bigint AS failed_1h,
        round(j.lost_1h * k.k_1h)::bigint AS lost_1h,
        round(j.canceled_1h * k.k_1h)::bigint AS canceled_1h,
        j.in_1m, j.in_15m,
        round(j.out_1m * k.k_1m)::bigint AS out_1m,
        round(j.out_15m * k.k_15m)::bigint AS out_15m,
        j.wait_p50_s, j.wait_p95_s, j.wait_samples,
        j.run_p50_s, j.run_p95_s, j.run_mean_s, j.run_samples,
        array_remove(ARRAY[
            CASE WHEN k.k_1h <> 1 THEN 'succeeded_1h' END,
            CASE WHEN k.k_1h <> 1 THEN 'failed_1h' END,
            CASE WHEN k.k_1h <> 1 THEN 'lost_1h' END,
            CASE WHEN k.k_1h <> 1 THEN 'canceled_1h' END,
            CASE WHEN k.k_1m <> 1 THEN 'out_1m' END,
            CASE WHEN k.k_15m <> 1 THEN 'out_15m' END,
            CASE WHEN k.k_15m <> 1 THEN 'wait_p50_s' END,
            CASE WHEN k.k_15m <> 1 THEN 'wait_p95_s' END,
            CASE WHEN k.k_15m <> 1 THEN 'run_p50_s' END,
            CASE WHEN k.k_15m <> 1 THEN 'run_p95_s' END,
            CASE WHEN k.k_15m <> 1 THEN 'run_mean_s' END
        ], NULL) AS estimated,
        -- Counts of rows read where a read stopped at its cap: lower bounds.
        array_remove(ARRAY[
            CASE WHEN k.k_1m <> 1 OR qc.queued_from > p.now - interval '1 minute'
                 THEN 'in_1m' END,
            CASE WHEN k.k_15m <> 1 OR qc.queued_from > p.now - interval '15 minutes'
                 THEN 'in_15m' END,
            CASE WHEN k.k_15m <> 1 THEN 'wait_samples' END,
            CASE WHEN k.k_15m <> 1 THEN 'run_samples' END,
            -- A partitioned read that stopped at its cap may have left an
            -- older due job unread: the age shown is a lower bound.
            CASE WHEN b.part_capped THEN 'oldest_queued_s' END
        ], NULL) AS at_least
    FROM backlog b
    FULL JOIN job_agg j ON j.queue = b.queue
    LEFT JOIN queued_cover qc ON qc.queue = coalesce(b.queue, j.queue)
    CROSS JOIN p
    CROSS JOIN cover k
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
       coalesce(j.queued_capped, 0) AS queued_capped,
       coalesce(j.delayed_capped, 0) AS delayed_capped,
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
       c.scale_limit, c.rate_limit, c.rate_burst,
       coalesce(j.estimated, '{}'::text[]) AS estimated,
       coalesce(j.at_least, '{}'::text[]) AS at_least
FROM queue_agg j
FULL JOIN worker_agg w ON w.queue = j.queue
FULL JOIN ctl c ON c.queue = coalesce(j.queue, w.queue)
WHERE j.queue IS NOT NULL OR w.queue IS NOT NULL OR c.in_force
ORDER BY 1
