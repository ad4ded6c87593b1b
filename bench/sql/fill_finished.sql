-- Scale bench fill: jobs %(lo)s..%(hi)s of %(total)s finished jobs, with the
-- job_events rows the engine writes for them, in one statement.
-- Rows look like the engine's after claim and finish (finish_and_claim_jobs.sql):
--   88 percent succeeded (1 attempt: claimed, succeeded), 8 percent failed after 3 attempts
--   (claimed, retry_scheduled, claimed, retry_scheduled, claimed, failed, with the
--   error as the events' message), 4 percent canceled while queued (one event).
--   Enqueue writes no event (enqueue.sql), so there is no 'created' row.
-- finished_at grows with g over %(span_s)s seconds ending at %(end_at)s, so ids
-- are in time order as in production; 10 percent carry an idempotency key.
WITH src AS (
    SELECT g,
           CASE WHEN g %% 100 < 88 THEN 'succeeded'
                WHEN g %% 100 < 96 THEN 'failed'
                ELSE 'canceled' END AS status,
           %(end_at)s::timestamptz
               - make_interval(secs => (%(total)s - g)::float8 * %(span_s)s / %(total)s)
               AS finished_at,
           (5 + (g * 7919) %% 2000)::bigint AS duration_ms,
           (ARRAY['default', 'emails', 'reports', 'webhooks'])[1 + (g %% 4)::int] AS queue
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g
),
ins AS (
    INSERT INTO queue_engine.jobs (
        queue, task, args, status, priority, available_at, attempt, max_attempts,
        heartbeat_at, claimed_by, idempotency_key, result, error,
        created_at, started_at, finished_at, duration_ms
    )
    SELECT s.queue,
           'app.tasks.' || s.queue || '.handle',
           jsonb_build_object('user_id', s.g %% 100000, 'request_id', md5(s.g::text),
                              'payload', repeat('x', 40 + (s.g %% 80)::int)),
           s.status,
           100,
           s.finished_at - make_interval(secs => s.duration_ms / 1000.0 + 0.5),
           CASE s.status WHEN 'succeeded' THEN 1 WHEN 'failed' THEN 3 ELSE 0 END,
           3,
           CASE WHEN s.status = 'canceled' THEN NULL
                ELSE s.finished_at - make_interval(secs => s.duration_ms / 1000.0) END,
           CASE WHEN s.status = 'canceled' THEN NULL
                ELSE 'worker-' || (s.g %% 8) || '.example.com:' || (1000 + s.g %% 50) || ':a1b2c3d4' END,
           CASE WHEN s.g %% 10 = 0 THEN 'order-' || s.g END,
           CASE WHEN s.status = 'succeeded'
                THEN jsonb_build_object('ok', true, 'sent', s.g %% 7, 'ms', s.duration_ms) END,
           CASE WHEN s.status = 'failed'
                THEN E'Traceback (most recent call last):\n  File "app/tasks.py", line 42, in handle\n'
                     || E'    resp = client.post(url, json=payload, timeout=10)\n'
                     || 'TimeoutError: upstream ' || s.queue || ' took longer than 10 s' END,
           s.finished_at - make_interval(secs => s.duration_ms / 1000.0 + 0.5),
           CASE WHEN s.status = 'canceled' THEN NULL
                ELSE s.finished_at - make_interval(secs => s.duration_ms / 1000.0) END,
           s.finished_at,
           CASE WHEN s.status = 'canceled' THEN NULL ELSE s.duration_ms END
    FROM src s
    ORDER BY s.g
    RETURNING id, status, attempt, claimed_by, started_at, finished_at, error
)
INSERT INTO queue_engine.job_events
    (job_id, at, kind, from_status, to_status, attempt, worker_id, message)
SELECT e.job_id, e.at, e.kind, e.from_status, e.to_status, e.attempt, e.worker_id, e.message
FROM (
    -- one 'claimed' per attempt
    SELECT i.id AS job_id, i.started_at - make_interval(secs => (i.attempt - a) * 30) AS at,
           'claimed' AS kind, 'queued' AS from_status, 'running' AS to_status, a AS attempt,
           i.claimed_by AS worker_id, NULL::text AS message, 2 * a AS seq
    FROM ins i CROSS JOIN LATERAL generate_series(1, i.attempt) a
    UNION ALL
    -- a retry after every attempt but the last
    SELECT i.id, i.started_at - make_interval(secs => (i.attempt - a) * 30 - 1),
           'retry_scheduled', 'running', 'queued', a, i.claimed_by,
           'TimeoutError: upstream took longer than 10 s', 2 * a + 1
    FROM ins i CROSS JOIN LATERAL generate_series(1, i.attempt - 1) a
    UNION ALL
    -- the final transition
    SELECT i.id, i.finished_at, i.status,
           CASE WHEN i.status = 'canceled' THEN 'queued' ELSE 'running' END,
           i.status, i.attempt, i.claimed_by,
           CASE WHEN i.status = 'failed' THEN 'TimeoutError: upstream took longer than 10 s' END,
           1000
    FROM ins i
) e
ORDER BY e.job_id, e.seq
