-- After a (re)connect: give back the running jobs claimed by this worker that it
-- does not hold. A finish-and-claim whose reply was lost with the connection may
-- have committed: its claims are then this worker's in the table, but the worker
-- never saw them, so nobody would run them until their lease lapsed. (After a
-- server crash the reverse happens too: the server lost a finish, and the job the
-- worker had finished is running again under its id.) This worker does not run
-- them now, so the attempt is refunded (a 'released' event says why) and they
-- run again at once; a job whose cancel was requested meanwhile ends 'canceled'.
WITH orphan AS (
    SELECT j.id
    FROM __SCHEMA__.jobs j
    WHERE j.status = 'running'
      AND j.claimed_by = %(worker_id)s
      AND NOT (j.id = ANY (%(held_ids)s::bigint[]))
    FOR UPDATE SKIP LOCKED
),
upd AS (
    UPDATE __SCHEMA__.jobs j SET
        status = CASE WHEN j.cancel_requested THEN 'canceled' ELSE 'queued' END,
        attempt = greatest(j.attempt - 1, 0),
        finished_at = CASE WHEN j.cancel_requested THEN now() ELSE NULL END,
        lease_expires_at = NULL
    FROM orphan o
    WHERE j.id = o.id AND j.status = 'running'
    RETURNING j.id, j.queue, j.status, j.attempt
),
ev AS (
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT u.id, CASE u.status WHEN 'queued' THEN 'released' ELSE 'canceled' END,
           'running', u.status, u.attempt, %(worker_id)s,
           'running under this worker''s id but not held by it (a claim whose reply '
           'was lost with the connection, or a finish lost in a server crash); '
           'given back (attempt not counted)'
    FROM upd u
),
wake AS (
    SELECT pg_notify(%(jobs_channel)s, q.queue)
    FROM (SELECT DISTINCT u.queue FROM upd u WHERE u.status = 'queued') q
)
SELECT coalesce(array_agg(u.id ORDER BY u.id), '{}'::bigint[]) AS released
FROM upd u CROSS JOIN (SELECT count(*) FROM wake) w
