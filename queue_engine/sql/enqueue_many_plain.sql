-- Bulk insert of jobs that carry no idempotency or dedupe key, so no row can
-- conflict. The identity default is evaluated above the ORDER BY (volatile
-- target-list expressions run after sorting), so ids ascend in input order:
-- the caller sorts the returned ids to get them in input order. A test checks
-- this on a large shuffled batch.
INSERT INTO __SCHEMA__.jobs (
    queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
    lock_key, partition_key, producer, affinity_key
)
SELECT queue, task, args::jsonb, priority,
       coalesce(run_at, now() + make_interval(secs => coalesce(delay_s, 0))),
       max_attempts, timeout_s, lease_ttl_s, lock_key, partition_key, producer, affinity_key
FROM unnest(
    %(queue)s::text[], %(task)s::text[], %(args)s::text[], %(priority)s::smallint[],
    %(run_at)s::timestamptz[], %(delay_s)s::float8[], %(max_attempts)s::int[],
    %(timeout_s)s::int[], %(lease_ttl_s)s::int[], %(lock_key)s::text[],
    %(partition_key)s::text[], %(producer)s::text[], %(affinity_key)s::text[]
) WITH ORDINALITY AS t(queue, task, args, priority, run_at, delay_s, max_attempts,
                       timeout_s, lease_ttl_s, lock_key, partition_key, producer,
                       affinity_key, ord)
ORDER BY ord
RETURNING id
