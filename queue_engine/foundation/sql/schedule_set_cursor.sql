-- Start schedules' cursors at a chosen instant: the testing kit's sync_schedules(start=...)
-- so a test's clock decides which slot comes first. Unlike schedule_advance, the cursor
-- may move back (a test clock may start before the database's now()).
UPDATE __SCHEMA__.schedules SET checked_until = %(at)s
WHERE name = ANY(%(names)s::text[])
RETURNING name
