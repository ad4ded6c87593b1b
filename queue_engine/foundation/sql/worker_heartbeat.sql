-- One heartbeat: the worker's own row (liveness, telemetry), and for every job it
-- holds (running or prefetched) a lease extension, the latest progress, and the
-- cancel flag read back in the same statement. A held job that no longer matches
-- this worker's attempt is reported in lost_ids (reaped or re-claimed: a zombie).
-- stop_now reads back the operator's hard stop (`queue-ctl stop --now`,
-- migration 0030): the worker gives its running job back and exits 0.
--
-- Host telemetry (%(telemetry)s: {"load": [...], "cpu_pct", "mem_used_bytes",
-- "mem_total_bytes", "gpu": [...], "gpu_processes": [...]}, NULL on a beat
-- that only writes progress) is stored on the row, and with %(publish)s (the
-- opt-in QUEUE_ENGINE_WORKER_TELEMETRY_NOTIFY) also published on
-- %(telemetry_channel)s, in this same statement. Off by default: Postgres
-- signals every listening session of the database on each NOTIFY, whatever its
-- channel, so every worker's beat would wake every other worker's backend
-- (bench/idle_fleet.py: 100 idle workers, 7.3 % of a core with it, 3.5 % without).
WITH me AS (
    UPDATE __SCHEMA__.workers SET
        heartbeat_at = now(),
        state = %(state)s,
        current_job_id = %(current_job_id)s,
        rss_bytes = %(rss_bytes)s,
        cpu_percent = %(cpu_percent)s,
        telemetry = coalesce(%(telemetry)s::jsonb, telemetry),
        warm_key = %(warm_key)s
    WHERE id = %(worker_id)s
    RETURNING id, role, queue, host, rss_bytes, cpu_percent, telemetry, stop_now
),
published AS (
    SELECT pg_notify(%(telemetry_channel)s, jsonb_build_object(
               'worker_id', m.id, 'role', m.role, 'queue', m.queue, 'host', m.host,
               'cpu', m.cpu_percent, 'rss', m.rss_bytes,
               'load', m.telemetry -> 'load', 'gpu', m.telemetry -> 'gpu',
               'host_cpu', m.telemetry -> 'cpu_pct', 'mem_used', m.telemetry -> 'mem_used_bytes',
               'mem_total', m.telemetry -> 'mem_total_bytes',
               'gpu_processes', m.telemetry -> 'gpu_processes')::text)
    FROM me m
    WHERE %(telemetry)s::jsonb IS NOT NULL AND %(publish)s::boolean
),
held AS (
    SELECT *
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(progress)s::text[])
        AS h(id, attempt, progress)
),
renewed AS (
    UPDATE __SCHEMA__.jobs j SET
        heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => coalesce(j.lease_ttl_s, %(lease_ttl_s)s)),
        progress = coalesce(h.progress::jsonb, j.progress)
    FROM held h
    -- By primary key: coalesce() keeps the generic plan off the partial
    -- running-lease index and its dead entries (see finish_and_claim_jobs.sql).
    WHERE j.id = ANY (%(ids)s::bigint[])
      AND j.id = h.id
      AND coalesce(j.status, '') = 'running'
      AND j.claimed_by = %(worker_id)s
      AND j.attempt = h.attempt
    RETURNING j.id, j.cancel_requested
)
SELECT (SELECT count(*) FROM me) AS registered,
       (SELECT count(*) FROM published) AS published,
       coalesce((SELECT array_agg(h.id) FROM held h
                 WHERE NOT EXISTS (SELECT 1 FROM renewed r WHERE r.id = h.id)),
                '{}'::bigint[]) AS lost_ids,
       coalesce((SELECT array_agg(r.id) FROM renewed r WHERE r.cancel_requested),
                '{}'::bigint[]) AS cancel_ids,
       coalesce((SELECT m.stop_now FROM me m), false) AS stop_now
