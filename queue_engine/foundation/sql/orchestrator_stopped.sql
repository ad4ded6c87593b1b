-- A clean stop: the row stays (for `queue-ctl workers`) marked as stopped.
UPDATE __SCHEMA__.workers SET state = 'stopped', stopped_at = now(), heartbeat_at = now()
WHERE id = %(id)s
