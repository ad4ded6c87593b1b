-- Heartbeat telemetry for the metrics scrape: one row per live row of the
-- workers table (workers, orchestrators, schedulers; not stopped, not flagged
-- dead, heartbeat younger than %(dead_after_s)s seconds), so label cardinality
-- follows the running fleet and a gone process's series disappear. Ordered by
-- host, newest heartbeat first: the caller takes each host's load and GPUs from
-- its latest row that has them. load1, host_cpu, mem_used, mem_total and gpu
-- are NULL unless the document has the expected JSON types (a malformed row
-- must not fail the scrape).
SELECT w.id AS worker_id, w.role, coalesce(w.queue, '') AS queue, w.host,
       w.cpu_percent::float8 AS cpu_percent, w.rss_bytes,
       CASE WHEN jsonb_typeof(w.telemetry -> 'load' -> 0) = 'number'
            THEN (w.telemetry -> 'load' ->> 0)::float8 END AS load1,
       CASE WHEN jsonb_typeof(w.telemetry -> 'gpu') = 'array'
            THEN w.telemetry -> 'gpu' END AS gpu,
       CASE WHEN jsonb_typeof(w.telemetry -> 'cpu_pct') = 'number'
            THEN (w.telemetry ->> 'cpu_pct')::float8 END AS host_cpu,
       CASE WHEN jsonb_typeof(w.telemetry -> 'mem_used_bytes') = 'number'
             AND jsonb_typeof(w.telemetry -> 'mem_total_bytes') = 'number'
            THEN (w.telemetry ->> 'mem_used_bytes')::float8 END AS mem_used,
       CASE WHEN jsonb_typeof(w.telemetry -> 'mem_used_bytes') = 'number'
             AND jsonb_typeof(w.telemetry -> 'mem_total_bytes') = 'number'
            THEN (w.telemetry ->> 'mem_total_bytes')::float8 END AS mem_total
FROM __SCHEMA__.workers w
WHERE w.stopped_at IS NULL
  AND w.flagged_dead_at IS NULL
  AND w.heartbeat_at > now() - make_interval(secs => %(dead_after_s)s::float8)
ORDER BY w.host, w.heartbeat_at DESC, w.id
