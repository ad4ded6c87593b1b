-- enqueue_many_plain.sql for a batch in which some row leaves options to the
-- task's defaults (migration 0028): the same insert, with each row's unset
-- (NULL) queue, priority, max_attempts, timeout_s and lease_ttl_s taken from
-- the defaults of its defaults_of task: the published ones (task_defaults,
-- joined by hash: one probe per row, the table read once), else the
-- built-in ones (builtin_task_defaults, constants of the plan). defaults_of
-- is NULL for a row whose producer filled all five itself (its own
-- declaration of the task). About 1,100 server instructions per row of
-- ~65,000 (valgrind); a batch with nothing to fill is sent as
-- enqueue_many_plain.sql and pays none of it.
--
-- Columns as in enqueue_many_plain.sql: an array of per-row values, or the
-- one value of every row in <column>_all with a NULL array.
INSERT INTO __SCHEMA__.jobs (
    queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
    lock_key, partition_key, producer, affinity_key
)
SELECT coalesce(t.queue, %(queue_all)s::text, d.queue, b.queue),
       coalesce(t.task, %(task_all)s::text),
       coalesce(t.args, %(args_all)s::text)::jsonb,
       coalesce(t.priority, %(priority_all)s::smallint, d.priority, b.priority),
       coalesce(coalesce(t.run_at, %(run_at_all)s::timestamptz),
                now() + make_interval(secs => coalesce(t.delay_s, %(delay_s_all)s::float8, 0))),
       coalesce(t.max_attempts, %(max_attempts_all)s::int, d.max_attempts, b.max_attempts),
       coalesce(t.timeout_s, %(timeout_s_all)s::int, d.timeout_s, b.timeout_s),
       coalesce(t.lease_ttl_s, %(lease_ttl_s_all)s::int, d.lease_ttl_s, b.lease_ttl_s),
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
    unnest(%(producer)b::text[]), unnest(%(affinity_key)b::text[]),
    unnest(%(defaults_of)b::text[])
) AS t(ord, queue, task, args, priority, run_at, delay_s, max_attempts, timeout_s,
       lease_ttl_s, lock_key, partition_key, producer, affinity_key, defaults_of)
CROSS JOIN __SCHEMA__.builtin_task_defaults() AS b
LEFT JOIN __SCHEMA__.task_defaults d ON d.task = coalesce(t.defaults_of, %(defaults_of_all)s::text)
ORDER BY t.ord
RETURNING id
