-- The event timeline of one job (`queue-ctl show`), oldest first.
SELECT e.id, e.at, e.kind, e.from_status, e.to_status, e.attempt, e.worker_id, e.message
FROM __SCHEMA__.job_events e
WHERE e.job_id = %(id)s
ORDER BY e.id
