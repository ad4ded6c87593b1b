-- Add a schedule; no row back when the name is taken. Its cursor starts now:
-- slots before the schedule existed are not "missed".
INSERT INTO __SCHEMA__.schedules (name, expression, tz, task, queue, args, priority,
                                  max_attempts, timeout_s, catchup, overlap, enabled, source, app,
                                  workflow)
VALUES (%(name)s, %(expression)s, %(tz)s, %(task)s, %(queue)s, %(args)s::jsonb, %(priority)s,
        %(max_attempts)s, %(timeout_s)s, %(catchup)s, %(overlap)s, %(enabled)s, %(source)s,
        %(app)s, %(workflow)s)
ON CONFLICT (name) DO NOTHING
RETURNING name
