-- Insert one job that carries no idempotency or dedupe key: nothing can
-- conflict, so no conflict resolution (enqueue.sql) is needed. This is the
-- common case and the latency-critical one (a producer waiting on its commit).
-- Only what the server decides comes back (the id and the two times from
-- now()): the client knows every other column, since it just sent them or they
-- are the table's defaults, and builds the Job itself (operations.inserted_job).
-- See bench/runs/2026-11-27-log.md, "Single enqueue: where the time goes".
INSERT INTO __SCHEMA__.jobs (
    queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
    lock_key, partition_key, producer, affinity_key
) VALUES (
    %(queue)s, %(task)s, %(args)s::jsonb, %(priority)s,
    coalesce(%(run_at)s::timestamptz,
             now() + make_interval(secs => coalesce(%(delay_s)s::float8, 0))),
    %(max_attempts)s, %(timeout_s)s, %(lease_ttl_s)s,
    %(lock_key)s, %(partition_key)s, %(producer)s, %(affinity_key)s
)
RETURNING id, available_at, created_at
