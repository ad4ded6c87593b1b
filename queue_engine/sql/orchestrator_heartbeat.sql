-- Register or heartbeat an orchestrator or scheduler (%(role)s) in the workers
-- table (upsert, so a row pruned meanwhile comes back). backend_pid is this
-- heartbeat session's, so a sweep can tell at once that the process is gone
-- when the session is.
INSERT INTO __SCHEMA__.workers AS w
    (id, role, host, pid, backend_pid, state, rss_bytes, cpu_percent, telemetry)
VALUES
    (%(id)s, %(role)s, %(host)s, %(pid)s, pg_backend_pid(), %(state)s,
     %(rss_bytes)s, %(cpu_percent)s, %(telemetry)s::jsonb)
ON CONFLICT (id) DO UPDATE SET
    heartbeat_at = now(),
    backend_pid = pg_backend_pid(),
    state = EXCLUDED.state,
    rss_bytes = EXCLUDED.rss_bytes,
    cpu_percent = EXCLUDED.cpu_percent,
    telemetry = EXCLUDED.telemetry,
    stopped_at = NULL
RETURNING w.id
