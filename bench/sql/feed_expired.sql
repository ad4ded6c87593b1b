-- Scale bench pruner phase: %(n)s jobs that finished (succeeded) %(age_s)s seconds
-- ago, with their two events, as a stream of finished work the pruner must keep
-- up with (each is already past the 7-day default retention when it lands).
WITH ins AS (
    INSERT INTO queue_engine.jobs (
        queue, task, args, status, attempt, max_attempts, claimed_by, result,
        available_at, created_at, started_at, heartbeat_at, finished_at, duration_ms
    )
    SELECT 'default', 'app.tasks.default.handle',
           jsonb_build_object('user_id', g, 'request_id', md5(g::text), 'payload', repeat('x', 80)),
           'succeeded', 1, 3, 'worker-feed.example.com:1:a1b2c3d4',
           jsonb_build_object('ok', true),
           now() - make_interval(secs => %(age_s)s + 1), now() - make_interval(secs => %(age_s)s + 1),
           now() - make_interval(secs => %(age_s)s + 0.1), now() - make_interval(secs => %(age_s)s + 0.1),
           now() - make_interval(secs => %(age_s)s), 100
    FROM generate_series(1, %(n)s) g
    RETURNING id, claimed_by, started_at, finished_at
)
INSERT INTO queue_engine.job_events (job_id, at, kind, from_status, to_status, attempt, worker_id)
SELECT i.id, i.started_at, 'claimed', 'queued', 'running', 1, i.claimed_by FROM ins i
UNION ALL
SELECT i.id, i.finished_at, 'succeeded', 'running', 'succeeded', 1, i.claimed_by FROM ins i
