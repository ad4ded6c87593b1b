-- Dead-worker sweep (leader only): flag workers that stopped heartbeating while
-- they still own a running job, and clear the flag of flagged workers that
-- heartbeated again. One statement; each returned row says which it did.
--   * flag:  role 'worker', not stopped, not flagged yet, heartbeat_at older than
--            %(dead_after_s)s, owning at least one running job -> flagged_dead_at = now()
--   * clear: flagged, and heartbeat_at is newer than the flag (a fresh beat, or
--            the clean stop that stamps heartbeat_at) -> flagged_dead_at = NULL
-- The worker's own state is left alone: the flag is the orchestrator's verdict
-- and is undone by the next beat; the job itself is recovered by the reaper
-- when its lease lapses (a hung worker's heartbeat renews no lease either).
-- %(now)s pins the clock the staleness is measured against; NULL: now().
WITH stale AS MATERIALIZED (
    SELECT w.id
    FROM __SCHEMA__.workers w
    WHERE w.role = 'worker'
      AND w.stopped_at IS NULL
      AND w.flagged_dead_at IS NULL
      AND w.heartbeat_at < coalesce(%(now)s::timestamptz, now())
                           - make_interval(secs => %(dead_after_s)s::float8)
      AND EXISTS (SELECT 1 FROM __SCHEMA__.jobs j
                  WHERE j.status = 'running' AND j.claimed_by = w.id)
    ORDER BY w.heartbeat_at
    LIMIT %(limit)s
    FOR UPDATE OF w SKIP LOCKED
),
flagged AS (
    UPDATE __SCHEMA__.workers w SET flagged_dead_at = now()
    FROM stale s
    WHERE w.id = s.id
    RETURNING w.id, w.host, w.pid, w.queue, w.heartbeat_at
),
cleared AS (
    UPDATE __SCHEMA__.workers w SET flagged_dead_at = NULL
    WHERE w.flagged_dead_at IS NOT NULL
      AND w.heartbeat_at > w.flagged_dead_at
    RETURNING w.id, w.host, w.pid, w.queue, w.heartbeat_at
)
SELECT 'flagged' AS action, f.id, f.host, f.pid, f.queue, f.heartbeat_at,
       extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - f.heartbeat_at)::float8
           AS silent_s,
       coalesce(array_agg(j.id ORDER BY j.id) FILTER (WHERE j.id IS NOT NULL),
                '{}'::bigint[]) AS job_ids,
       max(j.lease_expires_at) AS lease_expires_at
FROM flagged f
LEFT JOIN __SCHEMA__.jobs j ON j.claimed_by = f.id AND j.status = 'running'
GROUP BY f.id, f.host, f.pid, f.queue, f.heartbeat_at
UNION ALL
SELECT 'cleared', c.id, c.host, c.pid, c.queue, c.heartbeat_at, NULL, '{}'::bigint[], NULL
FROM cleared c
ORDER BY 1, 2
