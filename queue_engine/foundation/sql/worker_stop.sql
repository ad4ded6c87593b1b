-- Mark this worker stopped (clean exit); a crashed worker is found by its stale heartbeat.
UPDATE __SCHEMA__.workers SET
    state = 'stopped',
    stopped_at = now(),
    heartbeat_at = now(),
    current_job_id = NULL
WHERE id = %(worker_id)s
