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
-- Per-key concurrency limits (migration 0031, docs/internals/flow-control.md):
-- a job with a concurrency_key is claimable only while concurrency_free() says
-- its key has a free slot. That function serialises the claims of one key
-- with a transaction advisory try-lock and counts the key's running rows with
-- a fresh snapshot, so no race lets more than the limit run; a key another
-- claim holds right now counts as full (skipped, like a row SKIP LOCKED
-- skips). A plain job pays one NULL test: the function is never called for it.
-- The same function applies the key's rate limit (migration 0033): a job
-- whose key's token bucket lacks its weight is skipped the same way, and the
-- status guard (jobs_guard_transition) takes the tokens of each job this
-- statement claims.
--
-- The operator controls (pause, scale, park: the gate CTE; rate: allowed) are
-- enforced here, by the claim, and only gate it: finishes are applied as usual,
-- so running jobs of a paused or parked worker's queue end normally.
--
-- Two variants: lines tagged --@warm (and the "-- @warm begin/end" block) are
-- only in the statement of a worker with a warm key, lines tagged --@cold only
-- in the others', so workers without one pay nothing for the preference. The
-- tags are read by queue_engine/foundation/sql/compiler.py, which also drops the comments
-- and numbers the placeholders $n (docs/internals/sql.md); the worker chooses
-- the variant of each batch in queue_engine/worker/store.py.
--
-- A third tag, --@followups (the "-- @followups begin/end" block), marks what
-- only the statement of a batch carrying follow-ups has: a handler's buffered
-- ctx.enqueue jobs, inserted here for the outcomes applied as successes, so
-- they exist iff the success commits (docs/guides/follow-ups.md). A batch
-- without follow-ups sends the statement without them and pays nothing.
--
-- A fourth, --@handover (the "-- @handover begin/end" blocks), is only in the
-- statement of a batch with a workflow node that succeeded: a child whose last
-- unfinished parent is that node goes from 'waiting' straight to 'running' for
-- this worker (docs/internals/workflows.md, "Hand-over"). Without it, the
-- child would become 'queued' in the trigger at the end of this statement,
-- after the claim read its snapshot, and a chain would cost two statements per
-- node. Plain jobs never send it.
--
-- A fifth, "solo", removes lines: the "-- @!solo begin/end" blocks (the
-- claim's CTEs and its two branches of the final SELECT) and the lines tagged
-- with "+!solo" are in every variant except the one a worker sends when the
-- job it finishes was itself handed over (worker/store.py, solo_handover): a
-- link of a chain, whose hand-over fills the one-job claim. Postgres
-- initialises every node of a generic plan at each execution, so the claim's
-- CTEs cost even when the hand-over leaves them nothing to take. When this
-- statement hands nothing over, the worker claims with the usual one at once.
--
-- A sixth, "claimonly", also removes lines: the "-- @!claimonly begin/end"
-- blocks (the finish's CTEs and the finish's branch of the final SELECT)
-- are left out of the statement a worker sends with nothing to
-- finish, to claim after an idle wait (a NOTIFY, a poll). It cannot combine
-- with followups, handover or solo, which all need a finish. For the same
-- reason as solo: a generic plan initialises every node it holds at each
-- execution, and the finish's UPDATE and INSERT open every index of jobs and
-- job_events even when they get no row, on the path that sets the wake
-- latency of an idle worker (bench/runs/2026-11-27-log.md, "The claim after an idle wait").
--
-- Two more make the common one-at-a-time statement smaller (bench/runs/2026-11-27-log.md,
-- "The one-job statement"). "onefinish" (exactly one outcome) reads it with
-- jsonb_to_record, which the planner knows gives one row, so the finish is a
-- primary-key probe instead of a hash join over an estimated hundred.
-- "oneclaim" (a claim of at most one job, no warm key) leaves out "pick",
-- whose ranking of a batch's jobs by lock_key has nothing to rank in one job,
-- and the count and sort over it. A generic plan sets up every node it has at
-- each execution, one job or a hundred. Blocks nest: a line is in a variant
-- when every block around it and its own tag say so.
--
-- Every CTE sees the same snapshot: a job finished here still looks running to
-- the claim, so it cannot be re-claimed by this statement, and its lock_key
-- stays busy until the next one.
WITH
-- @!claimonly begin
outcome AS (
    -- One JSON array of outcomes: a single parameter to send and parse, however many.
    SELECT *
    FROM jsonb_to_recordset(%(outcomes)s::jsonb)  --@!onefinish
    FROM jsonb_to_record(%(outcomes)s::jsonb -> 0)  --@onefinish
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
    WHERE j.id = ANY (ARRAY(SELECT oi.id FROM outcome oi))  --@!onefinish
    WHERE j.id = (SELECT oi.id FROM outcome oi)  --@onefinish
      AND j.id = o.id
      AND coalesce(j.status, '') = 'running'
      AND j.claimed_by = %(worker_id)s
      AND j.attempt = o.attempt
    RETURNING j.id, j.queue, j.status, o.attempt, o.delay_s,
              CASE WHEN o.status = 'queued' AND j.status = 'canceled'
                   THEN 'canceled' ELSE o.kind END AS kind,
              o.message,
              -- A job given back to run at once wakes the idle workers of its
              -- queue. Here, per row, rather than in a CTE of its own: that
              -- was three more plan nodes on every finish, and Postgres sends
              -- one notification per channel and payload a transaction.
              CASE WHEN j.status = 'queued' AND o.delay_s <= 0
                   THEN pg_notify(%(jobs_channel)s, j.queue)::text END AS woke
),
finish_events AS (
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT f.id, f.kind, 'running', f.status, f.attempt, %(worker_id)s, f.message
    FROM finished f
    RETURNING job_id  --@handover
),
-- @!claimonly end
-- @followups begin
followup AS MATERIALIZED (
    -- The follow-ups (%(followups)s, one JSON object each, queue_engine/producer/followups.py)
    -- of the outcomes this statement applied as successes, and only those: a
    -- zombie's or a late finish matches nothing in "finished", so its follow-ups
    -- are never inserted; a failure, retry or snooze sends none. Ids are drawn
    -- here, after the sort (a volatile target-list expression runs after ORDER
    -- BY), so follow-ups of one priority run in the order they were buffered and
    -- the events below can name each one's parent.
    SELECT nextval(pg_get_serial_sequence('__SCHEMA__.jobs', 'id')) AS new_id, x.*
    FROM jsonb_to_recordset(%(followups)s::jsonb)
        AS x(parent_id bigint, parent_attempt int, seq int, queue text, task text,
             args jsonb, priority smallint, run_at timestamptz, delay_s float8,
             max_attempts int, timeout_s int, lease_ttl_s int, idempotency_key text,
             dedupe_key text, lock_key text, partition_key text, producer text,
             affinity_key text, defaults_of text, concurrency_key text,
             concurrency_limit int, weight int)
    JOIN finished f ON f.id = x.parent_id AND f.attempt = x.parent_attempt
    WHERE f.status = 'succeeded'
    ORDER BY x.parent_id, x.seq
),
followup_jobs AS (
    -- As the client's enqueue: a follow-up whose idempotency or dedupe key is
    -- taken (by a job, or by an earlier follow-up of this batch) is skipped.
    -- The insert trigger wakes each queue's workers with one NOTIFY per statement.
    INSERT INTO __SCHEMA__.jobs (
        id, queue, task, args, priority, available_at, max_attempts, timeout_s, lease_ttl_s,
        idempotency_key, dedupe_key, lock_key, partition_key, producer, affinity_key,
        concurrency_key, concurrency_limit, weight
    )
    SELECT fu.new_id, coalesce(fu.queue, d.queue), fu.task, fu.args,
           coalesce(fu.priority, d.priority),
           coalesce(fu.run_at, now() + make_interval(secs => coalesce(fu.delay_s, 0))),
           coalesce(fu.max_attempts, d.max_attempts), coalesce(fu.timeout_s, d.timeout_s),
           coalesce(fu.lease_ttl_s, d.lease_ttl_s), fu.idempotency_key, fu.dedupe_key,
           fu.lock_key, fu.partition_key, fu.producer, fu.affinity_key,
           fu.concurrency_key, fu.concurrency_limit, fu.weight
    -- Options the handler left unset (NULL) take the defaults of the
    -- follow-up's task when the worker does not declare it (defaults_of; the
    -- published ones, else the built-in ones: migration 0028), as an enqueue.
    FROM followup fu
    CROSS JOIN LATERAL __SCHEMA__.task_defaults_of(fu.defaults_of) AS d
    -- One global order of key locks, as enqueue_many.sql: two statements taking
    -- overlapping keys in different orders would deadlock on the unique indexes.
    ORDER BY fu.idempotency_key, fu.dedupe_key, fu.new_id
    ON CONFLICT DO NOTHING
    RETURNING id
),
followup_events AS (
    -- Each follow-up's first event names the job (and attempt) whose success made it.
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT fu.new_id, 'created', NULL, 'queued', 0, %(worker_id)s,
           'follow-up of job ' || fu.parent_id || ' (attempt ' || fu.parent_attempt || ')'
    FROM followup fu
    JOIN followup_jobs fj ON fj.id = fu.new_id
),
-- @followups end
gate AS (
    -- One row when this worker may claim at all; evaluated once per statement
    -- (it names no job column: two primary-key or index probes of tiny tables).
    -- Every control is checked here, in the claim itself, so none depends on a
    -- worker having seen its NOTIFY (docs/operations.md, "Controls"):
    --   pause  the queue's row says paused (`queue-ctl pause`);
    --   scale  the worker's slot (%(slot)s, a session advisory lock only one
    --          session can hold, NULL when it holds none) is within the queue's
    --          scale_limit (`queue-ctl scale`): at most scale_limit workers pass;
    --   park   no park names this worker, or its host for its queue or for all.
    -- It gates the claim only: the finish above still runs. rated: the queue
    -- has a rate limit (NULL when it has no control row).
    SELECT (SELECT qr.rate_limit IS NOT NULL FROM __SCHEMA__.queues qr
            WHERE qr.name = %(queue)s) AS rated
    WHERE %(claim_limit)s > 0
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.queues qc
                      WHERE qc.name = %(queue)s
                        AND (qc.paused OR coalesce(%(slot)s::int, 2147483647) >= qc.scale_limit))
      AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.worker_parks p
                      WHERE p.worker_id = %(worker_id)s
                         OR (p.host = %(host)s AND coalesce(p.queue, %(queue)s) = %(queue)s))
),
-- @handover begin
handover AS (
    -- The hand-over: at most one child of a node this statement finished as
    -- 'succeeded' (every edge is met by a success), of this queue, due, whose
    -- only pending parent is that node (on the child's own row, or, for a wide
    -- fan-in, the last parent of its last gate). The child must also be what the claim
    -- could take: the gate is open, the queue has no rate limit, it has no
    -- lock_key nor concurrency_key, it is not an input node, and no queued
    -- job of better priority is due. The row's status and count are checked
    -- again when it is locked (a concurrent cancel wins). The trigger that releases the node's children
    -- at the end of this statement then finds this one running and leaves it.
    UPDATE __SCHEMA__.jobs j SET
        status = 'running',
        pending_parents = 0,
        attempt = j.attempt + 1,
        claimed_by = %(worker_id)s,
        started_at = now(),
        heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => coalesce(j.lease_ttl_s, %(lease_ttl_s)s))
    FROM (
        SELECT c.id, f.id AS parent_id, o.result AS parent_result
        FROM finished f
        JOIN outcome o ON o.id = f.id
        JOIN __SCHEMA__.job_deps d ON d.parent_id = f.id
        JOIN __SCHEMA__.jobs c ON c.id = d.child_id
        WHERE f.status = 'succeeded'
          AND c.status = 'waiting'
          AND c.pending_parents = 1
          AND (d.gate IS NULL OR (SELECT g.pending FROM __SCHEMA__.job_gates g
                                  WHERE g.child_id = c.id AND g.gate = d.gate) = 1)
          AND c.queue = %(queue)s
          AND c.available_at <= now()
          AND c.lock_key IS NULL
          AND c.concurrency_key IS NULL
          AND c.task <> 'queue-engine:input'
          AND EXISTS (SELECT 1 FROM gate g WHERE NOT coalesce(g.rated, false))
          AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.jobs b
                          WHERE b.queue = %(queue)s AND b.status = 'queued'
                            AND b.priority < c.priority AND b.available_at <= now())
        ORDER BY c.priority, c.id
        LIMIT 1
    ) h
    WHERE j.id = h.id
      AND coalesce(j.status, '') = 'waiting'
      AND j.pending_parents = 1
    RETURNING j.id, j.attempt, j.status, j.queue, j.task, j.args, j.max_attempts, j.priority,
              j.lock_key, j.lease_ttl_s, j.timeout_s, j.created_at, j.cancel_requested,
              j.affinity_key, j.workflow_id, j.node,
              -- The parents as the claim gives them (json, read by id: see
              -- claimed below), but the parent finished here as this
              -- statement leaves it (its snapshot still shows it running).
              (SELECT json_object_agg(p.node, CASE WHEN p.id = h.parent_id
                  THEN json_build_object('status', 'succeeded', 'result', h.parent_result)
                  ELSE json_build_object('status', p.status, 'result', p.result) END)
               FROM __SCHEMA__.job_deps pd
               CROSS JOIN LATERAL (SELECT p.id, p.node, p.status, p.result FROM __SCHEMA__.jobs p
                                   WHERE p.id = pd.parent_id OFFSET 0) p
               WHERE pd.child_id = j.id) AS parents,
              h.parent_id
),
handover_events AS (
    -- Written after the parents' end events (reading them all first): a
    -- child's history never shows it claimed before its parent ended.
    INSERT INTO __SCHEMA__.job_events
        (job_id, kind, from_status, to_status, attempt, worker_id, message)
    SELECT ho.id, 'claimed', 'waiting', 'running', ho.attempt, %(worker_id)s,
           'handed over by its last parent, job ' || ho.parent_id
    FROM handover ho CROSS JOIN (SELECT count(*) FROM finish_events) fe
)  --@solo
),  --@!solo
-- @handover end
-- @warm begin
head AS (
    -- Warm-state affinity (only in the statement of a worker with a warm key):
    -- the job the normal order would take first.
    SELECT h.priority, h.available_at
    FROM __SCHEMA__.jobs h
    WHERE h.queue = %(queue)s
      AND h.status = 'queued'
      AND h.available_at <= now()
    ORDER BY h.priority, h.fair_tag NULLS FIRST, h.available_at, h.id
    LIMIT 1
),
warm AS (
    -- A worker warm for an affinity key takes one job needing that key first,
    -- but never over a job of better priority, and not while the head of the
    -- queue has waited longer than %(affinity_wait_s)s: a cold job is delayed by
    -- the preference at most that long, so nothing starves. Within the key it
    -- takes the oldest job (jobs_affinity_idx), not the fair order of
    -- partitions (migration 0032): the preference overrides the fair turn as
    -- it overrides the queue's order, for at most that long.
    SELECT j.id, j.lock_key, j.priority, j.fair_tag, j.available_at, j.concurrency_key,
           CASE WHEN j.concurrency_key IS NOT NULL
                THEN __SCHEMA__.concurrency_free(j.concurrency_key, j.concurrency_limit,
                                                 j.weight) END AS free
    FROM __SCHEMA__.jobs j
    WHERE j.queue = %(queue)s
      AND j.affinity_key = %(warm_key)s
      AND j.status = 'queued'
      AND j.available_at <= now()
      AND j.priority <= (SELECT hp.priority FROM head hp)
      AND (SELECT ha.available_at FROM head ha)
          > now() - make_interval(secs => %(affinity_wait_s)s)
      -- A handed-over child already fills a one-job claim.
      AND (SELECT count(*) FROM handover) < %(claim_limit)s  --@warm+handover
      AND (j.lock_key IS NULL OR (
            SELECT r.id FROM __SCHEMA__.jobs r
            WHERE r.lock_key = j.lock_key AND r.status = 'running') IS NULL)
      AND (j.concurrency_key IS NULL
           OR __SCHEMA__.concurrency_free(j.concurrency_key, j.concurrency_limit, j.weight)
              IS DISTINCT FROM 0)
      AND EXISTS (SELECT 1 FROM gate)
    ORDER BY j.priority, j.available_at, j.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
),
-- @warm end
-- @!solo begin
candidate AS (
    SELECT j.id, j.lock_key, j.priority, j.fair_tag, j.available_at
           -- A batch ranks the candidates of one concurrency key (pick): each
           -- keyed row's free slots, as the filter below just counted them.
           , j.concurrency_key  --@!oneclaim
           , CASE WHEN j.concurrency_key IS NOT NULL  --@!oneclaim
                  THEN __SCHEMA__.concurrency_free(j.concurrency_key, j.concurrency_limit,  --@!oneclaim
                                                   j.weight)  --@!oneclaim
                  END AS free  --@!oneclaim
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
      -- A keyed job only while its key has a free slot (NULL: no limit is
      -- set). Evaluated after the NULL test, so a plain row never calls it.
      AND (j.concurrency_key IS NULL
           OR __SCHEMA__.concurrency_free(j.concurrency_key, j.concurrency_limit, j.weight)
              IS DISTINCT FROM 0)
      -- A one-time filter (no column of j): when the gate is closed, the index
      -- scan never starts.
      AND EXISTS (SELECT 1 FROM gate)
      AND j.id <> ALL (ARRAY(SELECT w.id FROM warm w))  --@warm
    -- Fair share across partitions (migration 0032): a job with a partition
    -- key carries its turn (fair_tag, given at insert); plain jobs have none
    -- and keep the order (priority, available_at, id), ahead of partitioned
    -- jobs of their priority. jobs_claimable_idx has this order: no sort.
    ORDER BY j.priority, j.fair_tag NULLS FIRST, j.available_at, j.id
    LIMIT %(claim_limit)s
        - (SELECT count(*) FROM warm)  --@warm
        - (SELECT count(*) FROM handover)  --@handover+!solo
    FOR UPDATE SKIP LOCKED
),
-- @!oneclaim begin
pick AS (
    -- Two due jobs of one lock_key in this batch: only the first may run. Of
    -- one concurrency key, only as many as the key has free slots (the
    -- running jobs the function counted do not include this batch's).
    SELECT ranked.id, ranked.warm, ranked.priority, ranked.fair_tag, ranked.available_at
    FROM (
        SELECT c.id, c.lock_key, c.warm, c.priority, c.fair_tag, c.available_at,
               c.concurrency_key, c.free,
               row_number() OVER (PARTITION BY c.lock_key
                                  ORDER BY c.warm DESC, c.priority, c.fair_tag NULLS FIRST,
                                           c.available_at, c.id) AS rn,
               row_number() OVER (PARTITION BY c.concurrency_key
                                  ORDER BY c.warm DESC, c.priority, c.fair_tag NULLS FIRST,
                                           c.available_at, c.id) AS crn
        FROM (
            SELECT w.*, true AS warm FROM warm w UNION ALL  --@warm
            SELECT c.*, false AS warm FROM candidate c
        ) c
    ) ranked
    WHERE (ranked.lock_key IS NULL OR ranked.rn = 1)
      AND (ranked.concurrency_key IS NULL OR ranked.free IS NULL OR ranked.crn <= ranked.free)
),
-- @!oneclaim end
allowed AS (
    -- The rate limit (`queue-ctl rate`): how many of the picked jobs may start
    -- now. A queue without one gets them all, without a function call or a
    -- lock; a rate-limited queue's claims queue up on its row until they commit
    -- (take_rate_tokens in migrations/0004_fleet_controls.sql). A volatile
    -- CTE is materialised: the function runs at most once per statement.
    -- picked: the picked jobs, counted once here (not again for the last
    -- branch of the output: each count is an aggregate to set up per statement).
    -- @!oneclaim begin
    SELECT CASE WHEN (SELECT g.rated FROM gate g)
                THEN __SCHEMA__.take_rate_tokens(%(queue)s, p.picked)
                ELSE p.picked END AS n,
           p.picked
    FROM (SELECT count(*)::int AS picked FROM pick) p
    -- @!oneclaim end
    -- @oneclaim begin
    -- One row when there is a candidate (the gate is open then), none otherwise.
    SELECT CASE WHEN g.rated THEN __SCHEMA__.take_rate_tokens(%(queue)s, 1) ELSE 1 END AS n,
           1 AS picked
    FROM gate g, candidate c
    -- @oneclaim end
),
claimed AS (
    UPDATE __SCHEMA__.jobs j SET
        status = 'running',
        attempt = j.attempt + 1,
        claimed_by = %(worker_id)s,
        started_at = now(),
        heartbeat_at = now(),
        lease_expires_at = now() + make_interval(secs => coalesce(j.lease_ttl_s, %(lease_ttl_s)s))
    -- By primary key (see above); the picked jobs the rate limit withholds are
    -- left queued (their row locks go with this statement's commit).
    WHERE j.id = ANY (ARRAY(SELECT p.id FROM pick p  --@!oneclaim
                            ORDER BY p.warm DESC, p.priority, p.fair_tag NULLS FIRST,  --@!oneclaim
                                     p.available_at, p.id  --@!oneclaim
                            LIMIT (SELECT a.n FROM allowed a)))  --@!oneclaim
    WHERE j.id = (SELECT c.id FROM candidate c WHERE (SELECT a.n FROM allowed a) > 0)  --@oneclaim
    RETURNING j.id, j.attempt, j.status, j.queue, j.task, j.args, j.max_attempts, j.priority,
              j.lock_key, j.lease_ttl_s, j.timeout_s, j.created_at, j.cancel_requested,
              j.affinity_key, j.workflow_id, j.node,
              -- A workflow node's parents (name -> status and result), for the
              -- handler's ctx.parents: a plain job never runs the subquery.
              -- json, not jsonb: the worker parses the text either way, and
              -- jsonb would sort the keys and build its binary form first
              -- (10,000 instructions a node; a wide fan-in's 10,000 parents).
              CASE WHEN j.workflow_id IS NULL THEN NULL ELSE (
                  SELECT json_object_agg(p.node, json_build_object('status', p.status,
                                                                    'result', p.result))
                  FROM __SCHEMA__.job_deps d
                  -- One lookup by id per parent, whatever the statistics: the
                  -- worker plans this once, often on a young table (a plan
                  -- made while jobs looked empty scanned all of jobs for each
                  -- parent: 0.54 s for a 3,000-parent fan-in's claim).
                  -- OFFSET 0 keeps the planner from turning it into a join.
                  CROSS JOIN LATERAL (SELECT p.node, p.status, p.result FROM __SCHEMA__.jobs p
                                      WHERE p.id = d.parent_id OFFSET 0) p
                  WHERE d.child_id = j.id) END AS parents
),
claim_events AS (
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, worker_id)
    SELECT c.id, 'claimed', 'queued', 'running', c.attempt, %(worker_id)s
    FROM claimed c
)
-- @!solo end
-- is_claim: true for a claimed job, false for an applied finish, NULL for one
-- row saying the rate limit withheld picked jobs (retry when a token is due).
-- @!solo begin
SELECT true AS is_claim, c.id, c.attempt, c.status, c.queue, c.task, c.args, c.max_attempts,
       c.priority, c.lock_key, c.lease_ttl_s, c.timeout_s, c.created_at, c.cancel_requested,
       c.affinity_key, c.workflow_id, c.node, c.parents, false AS handed_over
FROM claimed c
UNION ALL
-- @!solo end
-- @handover begin
SELECT true, ho.id, ho.attempt, ho.status, ho.queue, ho.task, ho.args, ho.max_attempts,
       ho.priority, ho.lock_key, ho.lease_ttl_s, ho.timeout_s, ho.created_at,
       ho.cancel_requested, ho.affinity_key, ho.workflow_id, ho.node, ho.parents, true
FROM handover ho
UNION ALL
-- @handover end
-- @!claimonly begin
SELECT false, f.id, f.attempt, f.status, f.queue, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL
FROM finished f
-- @!claimonly end
-- @!solo begin
UNION ALL  --@!claimonly+!solo
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL
FROM allowed a
WHERE a.n < a.picked
-- @!solo end
