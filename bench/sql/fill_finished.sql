-- Scale bench fill, third write: jobs %(lo)s..%(hi)s of %(total)s (job g at id
-- %(first_id)s + g - %(lo)s) finished as the worker's statement finishes them
-- (finish_and_claim_jobs.sql), with the job_events rows the engine writes:
--   88 percent succeeded (1 attempt: claimed, succeeded), 8 percent failed after 3 attempts
--   (claimed, retry_scheduled, claimed, retry_scheduled, claimed, failed, with the
--   error as the events' message), 4 percent canceled while queued (one event).
--   Enqueue writes no event (enqueue.sql), so there is no 'created' row.
-- finished_at grows with g over %(span_s)s seconds ending at %(end_at)s, so ids
-- are in time order as in production.
WITH src AS (
    SELECT m.id, m.g,
           CASE WHEN m.g %% 100 < 88 THEN 'succeeded'
                WHEN m.g %% 100 < 96 THEN 'failed'
                ELSE 'canceled' END AS status,
           %(end_at)s::timestamptz
               - make_interval(secs => (%(total)s - m.g)::float8 * %(span_s)s / %(total)s)
               AS finished_at,
           (5 + (m.g * 7919) %% 2000)::bigint AS duration_ms
    FROM (SELECT id, %(lo)s::bigint + id - %(first_id)s::bigint AS g
          FROM generate_series(%(first_id)s::bigint, %(first_id)s::bigint + %(hi)s - %(lo)s) id) m
),
ins AS (
    UPDATE queue_engine.jobs j
    SET status = s.status,
        result = CASE WHEN s.status = 'succeeded'
                      THEN jsonb_build_object('ok', true, 'sent', s.g %% 7, 'ms', s.duration_ms) END,
        error = CASE WHEN s.status = 'failed'
                     THEN E'Traceback (most recent call last):\n  File "app/tasks.py", line 42, in handle\n'
                          || E'    resp = client.post(url, json=payload, timeout=10)\n'
                          || 'TimeoutError: upstream ' || j.queue || ' took longer than 10 s' END,
        finished_at = s.finished_at,
        duration_ms = CASE WHEN s.status = 'canceled' THEN NULL ELSE s.duration_ms END,
        lease_expires_at = NULL
    FROM src s
    WHERE j.id = s.id
    RETURNING j.id, j.status, j.attempt, j.claimed_by, j.started_at, j.finished_at, j.error
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
