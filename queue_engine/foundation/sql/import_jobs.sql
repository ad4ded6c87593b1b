-- queue-ctl import: one batch of jobs read from a system this engine replaces
-- (dataloader, pqrun, queue_workflows), written with their id map in one
-- statement, so the map row and the job it maps commit together or not at all.
--
-- Why not enqueue_many.sql: an imported job keeps its attempts (a job that
-- ran twice there has two attempts spent here) and its creation time, which
-- the enqueue statements never set. Everything else is an ordinary enqueue:
-- the row-rules trigger wakes the queue's workers (NOTIFY) and fills the
-- task's defaults for a queue, priority or max_attempts left NULL (0028), and
-- the unique indexes hold idempotency and dedupe keys.
--
-- A row whose old id is already in imported_ids is not read again (a second
-- run adds nothing). A row whose key collides with a job of this engine (a
-- client sent the same idempotency key to both systems during the cut-over)
-- is mapped to that job, as enqueue answers the existing job; `created` is
-- false for it. A NULL new id: the conflicting job committed after this
-- statement's snapshot; the next run imports the row.
WITH input AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('__SCHEMA__.jobs', 'id')) AS new_id, t.*
    FROM unnest(
        %(old_id)s::text[], %(queue)s::text[], %(task)s::text[], %(args)s::text[],
        %(priority)s::smallint[], %(available_at)s::timestamptz[], %(attempt)s::int[],
        %(max_attempts)s::int[], %(timeout_s)s::int[], %(lease_ttl_s)s::int[],
        %(idempotency_key)s::text[], %(dedupe_key)s::text[], %(lock_key)s::text[],
        %(partition_key)s::text[], %(producer)s::text[], %(error)s::text[],
        %(created_at)s::timestamptz[]
    ) WITH ORDINALITY AS t(old_id, queue, task, args, priority, available_at, attempt,
                           max_attempts, timeout_s, lease_ttl_s, idempotency_key, dedupe_key,
                           lock_key, partition_key, producer, error, created_at, ord)
    WHERE NOT EXISTS (
        SELECT 1 FROM __SCHEMA__.imported_ids m
        WHERE m.source = %(source)s::text AND m.kind = 'job' AND m.old_id = t.old_id
    )
),
ins AS (
    INSERT INTO __SCHEMA__.jobs (
        id, queue, task, args, priority, available_at, attempt, max_attempts, timeout_s,
        lease_ttl_s, idempotency_key, dedupe_key, lock_key, partition_key, producer, error,
        created_at
    )
    SELECT i.new_id, i.queue, i.task, i.args::jsonb, i.priority, i.available_at, i.attempt,
           i.max_attempts, i.timeout_s, i.lease_ttl_s, i.idempotency_key, i.dedupe_key,
           i.lock_key, i.partition_key, i.producer, i.error, i.created_at
    FROM input i
    -- One global order of key locks, as enqueue_many.sql takes them.
    ORDER BY i.idempotency_key, i.dedupe_key
    ON CONFLICT DO NOTHING
    RETURNING id, idempotency_key, dedupe_key
),
resolved AS (
    SELECT i.ord, i.old_id, coalesce(direct.id, same_batch.id, existing.id) AS new_id,
           direct.id IS NOT NULL AS created
    FROM input i
    LEFT JOIN ins direct ON direct.id = i.new_id
    LEFT JOIN LATERAL (
        SELECT b.id FROM ins b
        WHERE direct.id IS NULL
          AND ((i.idempotency_key IS NOT NULL AND b.idempotency_key = i.idempotency_key)
            OR (i.dedupe_key IS NOT NULL AND b.dedupe_key = i.dedupe_key))
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
),
mapped AS (
    INSERT INTO __SCHEMA__.imported_ids (source, kind, old_id, new_id)
    SELECT %(source)s::text, 'job', r.old_id, r.new_id FROM resolved r
    WHERE r.new_id IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING old_id
)
SELECT r.old_id, r.new_id, r.created
FROM resolved r
ORDER BY r.ord
