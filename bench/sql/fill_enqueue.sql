-- Scale bench fill, first of three writes per chunk (then fill_claim.sql and
-- fill_finished.sql): jobs %(lo)s..%(hi)s of %(total)s inserted queued, as
-- enqueue_many does, so that their pages are laid out as the engine lays them
-- out: a row inserted small, then claimed and finished by two non-HOT updates
-- whose new versions go where the free-space map sends them, the earlier
-- versions left dead for VACUUM. (Before 2026-11-25 the fill inserted each
-- finished row directly: pages the engine never writes, every one holding the
-- fillfactor's reserve plus a few hundred bytes; bench/runs/2026-11-27-log.md, "Where new
-- jobs go: fillfactor 100".) Ids ascend with g (the identity is evaluated
-- after the ORDER BY): the next two statements find job g at id
-- first_id + g - lo. created_at and available_at are set for a job that
-- finishes at its finished_at (fill_finished.sql), 10 percent carry an
-- idempotency key.
WITH src AS (
    SELECT g,
           %(end_at)s::timestamptz
               - make_interval(secs => (%(total)s - g)::float8 * %(span_s)s / %(total)s)
               - make_interval(secs => (5 + (g * 7919) %% 2000) / 1000.0 + 0.5) AS created_at,
           (ARRAY['default', 'emails', 'reports', 'webhooks'])[1 + (g %% 4)::int] AS queue
    FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) g
),
ins AS (
    INSERT INTO queue_engine.jobs (
        queue, task, args, priority, available_at, max_attempts, idempotency_key, created_at
    )
    SELECT s.queue,
           'app.tasks.' || s.queue || '.handle',
           jsonb_build_object('user_id', s.g %% 100000, 'request_id', md5(s.g::text),
                              'payload', repeat('x', 40 + (s.g %% 80)::int)),
           100,
           s.created_at,
           3,
           CASE WHEN s.g %% 10 = 0 THEN 'order-' || s.g END,
           s.created_at
    FROM src s
    ORDER BY s.g
    RETURNING id
)
SELECT min(id) AS first_id, count(*) AS n FROM ins
