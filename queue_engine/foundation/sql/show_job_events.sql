-- The event timeline of one job (`queue-ctl show`, the HTTP API), oldest first.
-- %(after)s: only events with a larger id (a cursor: the last id seen); NULL: from the start.
-- %(limit)s: at most this many; NULL: all. Both ride the (job_id, id) index.
SELECT e.id, e.at, e.kind, e.from_status, e.to_status, e.attempt, e.worker_id, e.message
FROM __SCHEMA__.job_events e
WHERE e.job_id = %(id)s
  AND (%(after)s::bigint IS NULL OR e.id > %(after)s::bigint)
ORDER BY e.id
LIMIT %(limit)s::bigint
