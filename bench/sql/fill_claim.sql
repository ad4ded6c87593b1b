-- Scale bench fill, second write: the claim (finish_and_claim_jobs.sql sets
-- these columns) of jobs %(lo)s..%(hi)s, job g at id %(first_id)s + g - %(lo)s,
-- but for the 4 percent canceled while queued. A job that failed after 3
-- attempts is claimed once here with attempt 3 (its retries' versions are
-- left out: one running version per job).
UPDATE queue_engine.jobs j
SET status = 'running',
    attempt = CASE WHEN m.g %% 100 < 88 THEN 1 ELSE 3 END,
    claimed_by = 'worker-' || (m.g %% 8) || '.example.com:' || (1000 + m.g %% 50) || ':a1b2c3d4',
    started_at = j.created_at + interval '0.5 s',
    heartbeat_at = j.created_at + interval '0.5 s',
    lease_expires_at = j.created_at + interval '60.5 s'
FROM (SELECT id, %(lo)s::bigint + id - %(first_id)s::bigint AS g
      FROM generate_series(%(first_id)s::bigint, %(first_id)s::bigint + %(hi)s - %(lo)s) id) m
WHERE j.id = m.id AND m.g %% 100 < 96
