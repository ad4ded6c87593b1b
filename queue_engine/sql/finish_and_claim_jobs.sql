-- Finish the jobs this worker ran and claim the next ones, in ONE statement:
-- at steady state a job costs one round trip and one commit.
--
-- Finish: each outcome (a JSON array, one object per job) is applied only while the
-- job is still this worker's running attempt (status, claimed_by, attempt), so
-- a late, duplicate or zombie finish matches nothing and is reported by its
-- absence from the output, never by an error. A re-queue of a job whose cancel
-- was requested meanwhile ends 'canceled' instead.
--
-- Claim: up to claim_limit due jobs of the queue, best first, skipping rows
-- other workers hold (SKIP LOCKED) and jobs whose lock_key a running job holds,
-- so jobs waiting on a busy key are not churned through failed attempts. Two
-- workers may still pick two jobs of one idle key at the same moment: the unique
-- index on running lock keys then aborts one statement (the caller re-runs its
-- finish alone and retries the claim).
--
-- A paused queue (queues.paused) claims nothing; finishes are applied as usual,
-- so running jobs of a paused queue end normally.
--
-- Every CTE sees the same snapshot: a job finished here still looks running to
-- the claim, so it cannot be re-claimed by this statement, and its lock_key
-- stays busy until the next one.
WITH outcome AS (
    -- One JSON array of outcomes: a single parameter to send and parse, however many.
    SELECT *
    FROM jsonb_to_recordset(%(outcomes)s::jsonb)
        AS o(id bigint, attempt int, status text, kind text, result jsonb, error text,
             delay_s float8, refund int, duration_ms bigint, progress jsonb, message text)
),
finished AS (
    UPDATE __SCHEMA__.jobs j SET
        status = CASE WHEN o.status = 'queued' AND j.cancel_requested
                      THEN 'canceled' ELSE o.status END,
        attempt = j.attempt - o.refund,
        result = o.result,
        error = o.error,
        progress = coalesce(o.progress, j.progress),
        duration_ms = o.duration_ms,
        available_at = CASE WHEN o.status = 'queued' AND NOT j.cancel_requested
                            THEN now() + make_interval(secs => o.delay_s)
                            ELSE j.available_at END,
        finished_at = CASE WHEN o.status = 'queued' AND NOT j.cancel_requested
                           THEN NULL ELSE now() END,
        lease_expires_at = NULL
    FROM outcome o
    -- Reach the rows through the primary key. The worker runs this statement with
    -- a generic plan, which otherwise scans the partial running-lease index
    -- (believed tiny) and walks its dead entries: a cost per job that grew with
    -- the table. coalesce() keeps that index out of reach (the planner cannot
    -- prove its predicate from it); status is NOT NULL, so it changes nothing.
    WHERE j.id = ANY (ARRAY(SELECT oi.id FROM outcome oi))
      AND j.id = o.id
      AND coalesce(j.status, '') = 'running'
      AND j.claimed_by = %(worker_id)s
      AND j.attempt = o.attempt
    RETURNING j.id, j.queue, j.status, o.attempt, o.delay_s,
              CASE WHEN o.status = 'queued' AND j.status = 'canceled'
                   THEN 'canceled' ELSE o.kind END AS kind,
              o.message
),
finish_events AS (
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT f.id, f.kind, 'running', f.status, f.attempt, %(worker_id)s, f.message
    FROM finished f
),
wake AS (
    -- Jobs given back to run at once wake the idle workers of their queue.
    SELECT pg_notify(%(jobs_channel)s, q.queue)
    FROM (SELECT DISTINCT f.queue FROM finished f
          WHERE f.status = 'queued' AND f.delay_s <= 0) q
),
candidate AS (
    SELECT j.id, j.lock_key, j.priority, j.available_at
    FROM __SCHEMA__.jobs j
    WHERE j.queue = %(queue)s
      AND j.status = 'queued'
      AND j.available_at <= now()
      -- A scalar probe of the unique running-lock-key index (at most one row),
      -- rather than NOT EXISTS, which the planner turns into a hash of every
      -- running job's key built by walking the running-lease index.
      AND (j.lock_key IS NULL OR (
            SELECT r.id FROM __SCHEMA__.jobs r
            WHERE r.lock_key = j.lock_key AND r.status = 'running') IS NULL)
      -- A paused queue claims nothing (`queue-ctl pause`). The probe names no
      -- column of j, so it is a one-time filter: one primary-key lookup per
      -- statement, evaluated before the index scan starts (and not at all when
      -- claim_limit is 0). It gates the claim only: the finish above still runs.
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.queues qc
                      WHERE qc.name = %(queue)s AND qc.paused)
    ORDER BY j.priority, j.available_at, j.id
    LIMIT %(claim_limit)s
    FOR UPDATE SKIP LOCKED
),
pick AS (
    -- Two due jobs of one lock_key in this batch: only the first may run.
    SELECT ranked.id
    FROM (
        SELECT c.id, c.lock_key,
               row_number() OVER (PARTITION BY c.lock_key
                                  ORDER BY c.priority, c.available_at, c.id) AS rn
        FROM candidate c
    ) ranked
    WHERE ranked.lock_key IS NULL OR ranked.rn = 1
),
claimed AS (
    UPDATE __SCHEMA__.jobs j SET
        status = 'running',
        attempt = j.attempt + 1,
        claimed_by = %(worker_id)s,
        started_at = now(),
        heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => coalesce(j.lease_ttl_s, %(lease_ttl_s)s))
    FROM pick
    WHERE j.id = ANY (ARRAY(SELECT p.id FROM pick p))  -- by primary key (see above)
      AND j.id = pick.id
    RETURNING j.id, j.attempt, j.status, j.queue, j.task, j.args, j.max_attempts, j.priority,
              j.lock_key, j.lease_ttl_s, j.timeout_s, j.created_at, j.cancel_requested
),
claim_events AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, worker_id)
    SELECT c.id, 'claimed', 'queued', 'running', c.attempt, %(worker_id)s
    FROM claimed c
)
SELECT true AS is_claim, c.id, c.attempt, c.status, c.queue, c.task, c.args, c.max_attempts,
       c.priority, c.lock_key, c.lease_ttl_s, c.timeout_s, c.created_at, c.cancel_requested
FROM claimed c
UNION ALL
SELECT false, f.id, f.attempt, f.status, f.queue, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL
FROM finished f CROSS JOIN (SELECT count(*) FROM wake) w
