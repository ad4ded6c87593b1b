-- Insert one job, or return the existing job that holds its idempotency key
-- (any status) or its dedupe key (among queued/running jobs).
-- Zero rows means the conflicting job committed after this statement's
-- snapshot was taken (or left the active set meanwhile): the caller runs the
-- statement again, which takes a new snapshot.
WITH ins AS (
    INSERT INTO __SCHEMA__.jobs (
        queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, affinity_key
    ) VALUES (
        %(queue)s, %(task)s, %(args)s::jsonb, %(priority)s,
        coalesce(%(run_at)s::timestamptz,
                 now() + make_interval(secs => coalesce(%(delay_s)s::float8, 0))),
        %(max_attempts)s, %(timeout_s)s, %(lease_ttl_s)s,
        %(idempotency_key)s, %(dedupe_key)s, %(lock_key)s, %(partition_key)s, %(producer)s,
        %(affinity_key)s
    )
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
