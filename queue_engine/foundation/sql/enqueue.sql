-- Insert one job, or return the existing job that holds its idempotency key
-- (any status) or its dedupe key (among queued/running jobs).
-- Zero rows means the conflicting job committed after this statement's
-- snapshot was taken (or left the active set meanwhile): the caller runs the
-- statement again, which takes a new snapshot.
--
-- A job with a concurrency_key comes here too (operations.is_keyed): the plain
-- inserts, the usual enqueue, do not write those columns (migration 0031).
--
-- Options left unset (NULL) among queue, priority, max_attempts, timeout_s and
-- lease_ttl_s take the defaults of %(defaults_of)s (task_defaults_of: the
-- task's published ones, else the built-in ones; migration 0028), NULL when
-- the client filled all five already (from its own declaration of the task).
WITH ins AS (
    INSERT INTO __SCHEMA__.jobs (
        queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, affinity_key,
        concurrency_key, concurrency_limit, weight
    )
    SELECT coalesce(%(queue)s::text, d.queue), %(task)s::text, %(args)s::jsonb,
           coalesce(%(priority)s::smallint, d.priority),
           coalesce(%(run_at)s::timestamptz,
                    now() + make_interval(secs => coalesce(%(delay_s)s::float8, 0))),
           coalesce(%(max_attempts)s::int, d.max_attempts),
           coalesce(%(timeout_s)s::int, d.timeout_s),
           coalesce(%(lease_ttl_s)s::int, d.lease_ttl_s),
           %(idempotency_key)s::text, %(dedupe_key)s::text, %(lock_key)s::text,
           %(partition_key)s::text, %(producer)s::text, %(affinity_key)s::text,
           %(concurrency_key)s::text, %(concurrency_limit)s::int, %(weight)s::int
    FROM __SCHEMA__.task_defaults_of(%(defaults_of)s::text) AS d
    ON CONFLICT DO NOTHING
    RETURNING *
)
SELECT ins.*, true AS created FROM ins
UNION ALL
(
    SELECT j.*, false AS created
    FROM __SCHEMA__.jobs j
    WHERE NOT EXISTS (SELECT 1 FROM ins)
      AND (
            (j.idempotency_key = %(idempotency_key)s::text)
         OR (j.dedupe_key = %(dedupe_key)s::text AND j.status IN ('queued', 'running'))
      )
    ORDER BY (j.idempotency_key IS NOT DISTINCT FROM %(idempotency_key)s::text) DESC
    LIMIT 1
)
