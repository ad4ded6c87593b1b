-- Bulk insert in one statement; one row out per input row, in input order:
-- (ord, id, created). Ids are drawn before the insert so every input row can be
-- matched to its job whether it was inserted, deduplicated against a row of the
-- same batch, or against an existing job. A NULL id means the conflicting job
-- committed after this statement's snapshot, or (rarely) that the batch item
-- it collided with lost to a third one: the caller resubmits those rows.
WITH input AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('__SCHEMA__.jobs', 'id')) AS new_id, t.*
    FROM unnest(
        %(queue)s::text[], %(task)s::text[], %(args)s::text[], %(priority)s::smallint[],
        %(run_at)s::timestamptz[], %(delay_s)s::float8[], %(max_attempts)s::int[],
        %(timeout_s)s::int[], %(lease_ttl_s)s::int[], %(idempotency_key)s::text[],
        %(dedupe_key)s::text[], %(lock_key)s::text[], %(partition_key)s::text[],
        %(producer)s::text[], %(affinity_key)s::text[], %(defaults_of)s::text[],
        %(concurrency_key)s::text[], %(concurrency_limit)s::int[], %(weight)s::int[]
    ) WITH ORDINALITY AS t(queue, task, args, priority, run_at, delay_s, max_attempts,
                           timeout_s, lease_ttl_s, idempotency_key, dedupe_key, lock_key,
                           partition_key, producer, affinity_key, defaults_of,
                           concurrency_key, concurrency_limit, weight, ord)
),
-- Within the batch the first item of each key wins; later items sharing a key
-- with an earlier one are not inserted and resolve to the winner's id below.
winners AS (
    SELECT * FROM (
        SELECT input.*,
               min(ord) OVER (PARTITION BY idempotency_key) AS first_by_idempotency,
               min(ord) OVER (PARTITION BY dedupe_key) AS first_by_dedupe
        FROM input
    ) ranked
    WHERE (idempotency_key IS NULL OR first_by_idempotency = ord)
      AND (dedupe_key IS NULL OR first_by_dedupe = ord)
),
ins AS (
    INSERT INTO __SCHEMA__.jobs (
        id, queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, affinity_key,
        concurrency_key, concurrency_limit, weight
    )
    SELECT w.new_id, coalesce(w.queue, d.queue, b.queue), w.task, w.args::jsonb,
           coalesce(w.priority, d.priority, b.priority),
           coalesce(w.run_at, now() + make_interval(secs => coalesce(w.delay_s, 0))),
           coalesce(w.max_attempts, d.max_attempts, b.max_attempts),
           coalesce(w.timeout_s, d.timeout_s, b.timeout_s),
           coalesce(w.lease_ttl_s, d.lease_ttl_s, b.lease_ttl_s),
           w.idempotency_key, w.dedupe_key, w.lock_key, w.partition_key, w.producer,
           w.affinity_key, w.concurrency_key, w.concurrency_limit, w.weight
    FROM winners w
    -- Unset options (NULL) take the defaults of the row's defaults_of task, as
    -- in enqueue_many_plain_defaults.sql (migration 0028).
    CROSS JOIN __SCHEMA__.builtin_task_defaults() AS b
    LEFT JOIN __SCHEMA__.task_defaults d ON d.task = w.defaults_of
    -- One global order of key locks: producers sending overlapping keys in
    -- different orders would otherwise deadlock on the unique indexes.
    ORDER BY w.idempotency_key, w.dedupe_key
    ON CONFLICT DO NOTHING
    RETURNING id, idempotency_key, dedupe_key
)
SELECT i.ord,
       coalesce(direct.id, same_batch.id, existing.id) AS id,
       direct.id IS NOT NULL AS created
FROM input i
LEFT JOIN ins direct ON direct.id = i.new_id
LEFT JOIN LATERAL (
    SELECT b.id FROM ins b
    WHERE direct.id IS NULL
      AND ((i.idempotency_key IS NOT NULL AND b.idempotency_key = i.idempotency_key)
        OR (i.dedupe_key IS NOT NULL AND b.dedupe_key = i.dedupe_key))
    ORDER BY (b.idempotency_key IS NOT DISTINCT FROM i.idempotency_key) DESC
    LIMIT 1
) same_batch ON true
LEFT JOIN LATERAL (
    SELECT j.id FROM __SCHEMA__.jobs j
    WHERE direct.id IS NULL AND same_batch.id IS NULL
      AND ((i.idempotency_key IS NOT NULL AND j.idempotency_key = i.idempotency_key)
        OR (i.dedupe_key IS NOT NULL AND j.dedupe_key = i.dedupe_key
            AND j.status IN ('queued', 'running')))
    ORDER BY (j.idempotency_key IS NOT DISTINCT FROM i.idempotency_key) DESC
    LIMIT 1
) existing ON true
ORDER BY i.ord
