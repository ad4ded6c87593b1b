-- enqueue_plain.sql for a job whose producer left some of queue, priority,
-- max_attempts, timeout_s and lease_ttl_s unset (NULL) and does not declare
-- its task itself (migration 0028): each unset option takes the task's
-- defaults, task_defaults_of(task) (the published ones, else the built-in
-- ones), in this statement. So the five come back too, for the Job the client
-- builds (operations.inserted_job), and the client keeps them for a second
-- (kept_defaults.py): the lookup and the longer answer cost about a tenth
-- more of a single enqueue. A producer that declared the task, or set all
-- five, sends enqueue_plain.sql and pays nothing for the lookup.
INSERT INTO __SCHEMA__.jobs (
    queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
    lock_key, partition_key, producer, affinity_key
)
SELECT coalesce(%(queue)s::text, d.queue), %(task)s::text, %(args)s::jsonb,
       coalesce(%(priority)s::smallint, d.priority),
       coalesce(%(run_at)s::timestamptz,
                now() + make_interval(secs => coalesce(%(delay_s)s::float8, 0))),
       coalesce(%(max_attempts)s::int, d.max_attempts),
       coalesce(%(timeout_s)s::int, d.timeout_s),
       coalesce(%(lease_ttl_s)s::int, d.lease_ttl_s),
       %(lock_key)s::text, %(partition_key)s::text, %(producer)s::text, %(affinity_key)s::text
FROM __SCHEMA__.task_defaults_of(%(task)s::text) AS d
RETURNING id, available_at, created_at, queue, priority, max_attempts, timeout_s, lease_ttl_s
