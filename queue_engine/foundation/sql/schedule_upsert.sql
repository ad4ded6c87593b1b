-- Add or replace a schedule (code sync, `schedules add --replace`). A changed
-- expression or time zone restarts the cursor at now: the new timing applies to
-- slots after the change. With keep_enabled (code sync) an operator's
-- enable/disable survives scheduler restarts.
INSERT INTO __SCHEMA__.schedules AS s (name, expression, tz, task, queue, args, priority,
                                       max_attempts, timeout_s, catchup, overlap, enabled,
                                       source, app, workflow)
VALUES (%(name)s, %(expression)s, %(tz)s, %(task)s, %(queue)s, %(args)s::jsonb, %(priority)s,
        %(max_attempts)s, %(timeout_s)s, %(catchup)s, %(overlap)s, %(enabled)s, %(source)s,
        %(app)s, %(workflow)s)
ON CONFLICT (name) DO UPDATE SET
    expression = EXCLUDED.expression,
    tz = EXCLUDED.tz,
    task = EXCLUDED.task,
    queue = EXCLUDED.queue,
    args = EXCLUDED.args,
    priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts,
    timeout_s = EXCLUDED.timeout_s,
    catchup = EXCLUDED.catchup,
    overlap = EXCLUDED.overlap,
    enabled = CASE WHEN %(keep_enabled)s THEN s.enabled ELSE EXCLUDED.enabled END,
    source = EXCLUDED.source,
    app = EXCLUDED.app,
    workflow = EXCLUDED.workflow,
    checked_until = CASE
        WHEN s.expression IS DISTINCT FROM EXCLUDED.expression OR s.tz IS DISTINCT FROM EXCLUDED.tz
        THEN greatest(s.checked_until, now())
        ELSE s.checked_until
    END,
    updated_at = now()
WHERE (s.expression, s.tz, s.task, s.queue, s.args, s.priority, s.max_attempts, s.timeout_s,
       s.catchup, s.overlap, s.source, s.app, s.workflow)
      IS DISTINCT FROM
      (EXCLUDED.expression, EXCLUDED.tz, EXCLUDED.task, EXCLUDED.queue, EXCLUDED.args,
       EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.timeout_s, EXCLUDED.catchup,
       EXCLUDED.overlap, EXCLUDED.source, EXCLUDED.app, EXCLUDED.workflow)
   OR (NOT %(keep_enabled)s AND s.enabled IS DISTINCT FROM EXCLUDED.enabled)
RETURNING s.name, (xmax = 0) AS created
