-- Bulk insert of jobs that carry no idempotency or dedupe key, so no row can
-- conflict. The identity default is evaluated above the ORDER BY (volatile
-- target-list expressions run after sorting), so ids ascend in input order:
-- the caller sorts the returned ids to get them in input order. A test checks
-- this on a large shuffled batch.
--
-- Each column comes as an array of per-row values or, when every row has the
-- same value (the usual batch: one task, one queue), as that one value in
-- the parameter <column>_all with a NULL array: then neither the client nor the server
-- handles n copies of it. ROWS FROM pads the NULL arrays to the n rows of
-- generate_series, and coalesce takes the shared value. A column NULL in
-- every row is a NULL array and a NULL value. Arrays of text are sent in
-- binary (the b placeholders): text format would quote and escape every element.
INSERT INTO __SCHEMA__.jobs (
    queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
    lock_key, partition_key, producer, affinity_key
)
SELECT coalesce(t.queue, %(queue_all)s::text),
       coalesce(t.task, %(task_all)s::text),
       coalesce(t.args, %(args_all)s::text)::jsonb,
       coalesce(t.priority, %(priority_all)s::smallint),
       coalesce(coalesce(t.run_at, %(run_at_all)s::timestamptz),
                now() + make_interval(secs => coalesce(t.delay_s, %(delay_s_all)s::float8, 0))),
       coalesce(t.max_attempts, %(max_attempts_all)s::int),
       coalesce(t.timeout_s, %(timeout_s_all)s::int),
       coalesce(t.lease_ttl_s, %(lease_ttl_s_all)s::int),
       coalesce(t.lock_key, %(lock_key_all)s::text),
       coalesce(t.partition_key, %(partition_key_all)s::text),
       coalesce(t.producer, %(producer_all)s::text),
       coalesce(t.affinity_key, %(affinity_key_all)s::text)
FROM ROWS FROM (
    generate_series(1, %(n)s::int),
    unnest(%(queue)b::text[]), unnest(%(task)b::text[]), unnest(%(args)b::text[]),
    unnest(%(priority)s::smallint[]), unnest(%(run_at)s::timestamptz[]),
    unnest(%(delay_s)s::float8[]), unnest(%(max_attempts)s::int[]),
    unnest(%(timeout_s)s::int[]), unnest(%(lease_ttl_s)s::int[]),
    unnest(%(lock_key)b::text[]), unnest(%(partition_key)b::text[]),
    unnest(%(producer)b::text[]), unnest(%(affinity_key)b::text[])
) AS t(ord, queue, task, args, priority, run_at, delay_s, max_attempts, timeout_s,
       lease_ttl_s, lock_key, partition_key, producer, affinity_key)
ORDER BY t.ord
RETURNING id
