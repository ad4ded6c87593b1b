-- Register or heartbeat an orchestrator or scheduler (%(role)s) in the workers
-- table (upsert, so a row pruned meanwhile comes back). backend_pid is this
-- heartbeat session's, so a sweep can tell at once that the process is gone
-- when the session is.
--
-- Host telemetry (%(telemetry)s: the role's own keys plus {"load": [...],
-- "gpu": [...]}) is stored on the row and published on %(telemetry_channel)s in
-- this same statement, no extra round trip, with the payload of a worker's
-- heartbeat (worker_id, queue, host, cpu, rss, load, gpu; see
-- worker_heartbeat.sql) plus the row's role, so a dashboard listening there
-- sees every process of the fleet. Small and fixed in shape (well under
-- NOTIFY's 8000 bytes); delivered when the beat commits.
WITH me AS (
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
    RETURNING w.id, w.role, w.queue, w.host, w.rss_bytes, w.cpu_percent, w.telemetry
)
SELECT m.id,
       pg_notify(%(telemetry_channel)s, jsonb_build_object(
           'worker_id', m.id, 'role', m.role, 'queue', m.queue, 'host', m.host,
           'cpu', m.cpu_percent, 'rss', m.rss_bytes,
           'load', m.telemetry -> 'load', 'gpu', m.telemetry -> 'gpu',
           'host_cpu', m.telemetry -> 'cpu_pct', 'mem_used', m.telemetry -> 'mem_used_bytes',
           'mem_total', m.telemetry -> 'mem_total_bytes',
           'gpu_processes', m.telemetry -> 'gpu_processes')::text) AS published
FROM me m
