-- Make a queue's delayed jobs (retries, snoozes, run_at) due now: the testing kit's
-- drain(run_delayed=True) runs them in the same test instead of waiting, and
-- drain(at=...) only those due by that instant (%(until)s; NULL: all of them).
-- Only the time moves; status, attempt and everything else stay as the engine left them.
UPDATE __SCHEMA__.jobs j
SET available_at = now()
WHERE j.queue = %(queue)s
  AND j.status = 'queued'
  AND j.available_at > now()
  AND (%(until)s::timestamptz IS NULL OR j.available_at <= %(until)s::timestamptz)
RETURNING j.id
