-- Tell running schedulers that a schedule changed (delivered at commit); the payload
-- is the schedule name.
SELECT pg_notify(%(channel)s, %(name)s)
