-- A worker publishes its task registry when it starts (migration 0028,
-- queue_engine/producer/task_publications.py): one row per task in task_publications
-- for this worker, and each task's row of task_defaults set to this
-- publication, the newest. Enqueue paths then fill what their callers left
-- unset from task_defaults. Rows in task order, so two workers publishing at
-- once take the rows' locks in one order (no deadlock). Answers how many
-- tasks were published.
WITH publication AS (
    INSERT INTO __SCHEMA__.task_publications AS p (
        task, queue, priority, max_attempts, timeout_s, lease_ttl_s, stall_timeout_s, retry,
        worker_id, host, pid, app, published_at
    )
    SELECT g.task, g.queue, g.priority, g.max_attempts, g.timeout_s, g.lease_ttl_s,
           g.stall_timeout_s, g.retry, %(worker_id)s, %(host)s, %(pid)s, %(app)s, now()
    FROM unnest(
        %(task)s::text[], %(queue)s::text[], %(priority)s::smallint[], %(max_attempts)s::int[],
        %(timeout_s)s::int[], %(lease_ttl_s)s::int[], %(stall_timeout_s)s::int[],
        %(retry)s::jsonb[]
    ) AS g(task, queue, priority, max_attempts, timeout_s, lease_ttl_s, stall_timeout_s, retry)
    ORDER BY g.task
    ON CONFLICT (task, worker_id) DO UPDATE SET
        queue = EXCLUDED.queue, priority = EXCLUDED.priority,
        max_attempts = EXCLUDED.max_attempts, timeout_s = EXCLUDED.timeout_s,
        lease_ttl_s = EXCLUDED.lease_ttl_s, stall_timeout_s = EXCLUDED.stall_timeout_s,
        retry = EXCLUDED.retry, host = EXCLUDED.host, pid = EXCLUDED.pid, app = EXCLUDED.app,
        published_at = EXCLUDED.published_at
    RETURNING p.*
),
effective AS (
    -- The newest publication wins: a publisher whose transaction started
    -- before the one that wrote the row (now() is the transaction's start)
    -- leaves it. task_publications has task_defaults' columns, in its order.
    INSERT INTO __SCHEMA__.task_defaults AS d
    SELECT * FROM publication ORDER BY task
    ON CONFLICT (task) DO UPDATE SET
        queue = EXCLUDED.queue, priority = EXCLUDED.priority,
        max_attempts = EXCLUDED.max_attempts, timeout_s = EXCLUDED.timeout_s,
        lease_ttl_s = EXCLUDED.lease_ttl_s, stall_timeout_s = EXCLUDED.stall_timeout_s,
        retry = EXCLUDED.retry, worker_id = EXCLUDED.worker_id, host = EXCLUDED.host,
        pid = EXCLUDED.pid, app = EXCLUDED.app, published_at = EXCLUDED.published_at
    WHERE d.published_at <= EXCLUDED.published_at
    RETURNING d.task
)
SELECT (SELECT count(*) FROM publication) AS published,
       (SELECT count(*) FROM effective) AS effective
