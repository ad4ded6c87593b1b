-- Scale bench fill, second write: the claim (finish_and_claim_jobs.sql sets
-- these columns) of jobs %(lo)s..%(hi)s, job g at id %(first_id)s + g - %(lo)s,
-- but for the 4 percent canceled while queued. A job that failed after 3
-- attempts is claimed once here with attempt 3 (its retries' versions are
-- left out: one running version per job).
UPDATE queue_engine.jobs j
SET status = 'running',
    attempt = CASE WHEN g %% 100 < 88 THEN 1 ELSE 3 END,
    claimed_by = 'worker-' || (g %% 8) || '.example.com:' || (1000 + g %% 50) || ':a1b2c3d4',
    started_at = j.created_at + interval '0.5 s',
    heartbeat_at = j.created_at + interval '0.5 s',
    lease_expires_at = j.created_at + interval '60.5 s'
FROM (SELECT j2.id, %(lo)s::bigint + j2.id - %(first_id)s::bigint AS g
      FROM queue_engine.jobs j2
      WHERE j2.id BETWEEN %(first_id)s::bigint AND %(first_id)s::bigint + %(hi)s - %(lo)s) m
WHERE j.id = m.id AND m.g %% 100 < 96
