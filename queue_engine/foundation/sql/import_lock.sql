-- queue-ctl import: one importer per engine schema and source system at a
-- time (a session lock, released when the command's connection closes). Two
-- at once could both insert a job before either wrote its id map row; with
-- the lock the second is refused at once. %(key)s names schema and source.
SELECT pg_try_advisory_lock(hashtext(%(key)s::text)) AS locked
