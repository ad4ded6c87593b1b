-- Scale bench fill: %(n)s queued jobs (the standing backlog), due now, spread over
-- four queues other than the bench's drain queue, created over the last hour.
-- Enqueue writes no job_events row, so neither does this.
INSERT INTO queue_engine.jobs (queue, task, args, available_at, created_at, max_attempts)
SELECT (ARRAY['default', 'emails', 'reports', 'webhooks'])[1 + (g %% 4)::int],
       'app.tasks.' || (ARRAY['default', 'emails', 'reports', 'webhooks'])[1 + (g %% 4)::int]
           || '.handle',
       jsonb_build_object('user_id', g %% 100000, 'request_id', md5(g::text),
                          'payload', repeat('x', 40 + (g %% 80)::int)),
       now() - make_interval(secs => 3600.0 * (%(n)s - g) / %(n)s),
       now() - make_interval(secs => 3600.0 * (%(n)s - g) / %(n)s),
       3
FROM generate_series(1, %(n)s::bigint) g
ORDER BY g
