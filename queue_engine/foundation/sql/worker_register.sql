-- Register (or, after a reconnect, re-register) this worker process; its row is
-- heartbeated by worker_heartbeat and closed by worker_stop.
INSERT INTO __SCHEMA__.workers (id, role, queue, host, pid, backend_pid, state)
VALUES (%(worker_id)s, 'worker', %(queue)s, %(host)s, %(pid)s, pg_backend_pid(), %(state)s)
ON CONFLICT (id) DO UPDATE SET
    backend_pid = pg_backend_pid(),
    state = EXCLUDED.state,
    heartbeat_at = now(),
    stopped_at = NULL
