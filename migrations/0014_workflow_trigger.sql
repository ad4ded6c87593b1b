-- queue-engine: a node's end costs one trigger call and, in the common case,
-- one statement in it. __SCHEMA__ is replaced by the quoted engine schema name.
-- Design: docs/internals/workflows.md, "What a node's end costs".
--
-- Before this migration a node's end ran the trigger function, which called
-- workflow_tally (a PL/pgSQL function: its UPDATE of the tally shard) and
-- workflow_release (another, with its own SET plan_cache_mode: its first
-- statement on the node's edges and gates). Measured on a 1,000-node chain
-- (pg_stat_statements with track = all, track_functions = all): 159 µs of the
-- finish statement's 657 µs were the trigger, of which the two statements
-- themselves were 31 µs; the rest was the two calls (each an executor run of
-- its own, one of them a GUC push and a custom plan per call). The hand-over's
-- 'waiting' -> 'running' went to the guard's function: 35 µs more.
--
-- Now the trigger counts the node and takes it off its children's counts in
-- ONE statement of its own (tally shard, gates, the children hit), and calls a
-- function only for what is rarer: children to queue (workflow_release_hits),
-- descendants to cancel or skip (workflow_doom), a shard with no unfinished
-- node left (workflow_shard_done), and the moves back from a final status (a
-- retry: workflow_tally, as before).

-- The guard: a function call per status change, with the worker's pairs
-- decided by the function's first IF, and no WHEN at all. Postgres compiles a
-- row trigger's WHEN afresh for every statement that updates a row (it parses
-- the stored expression, rewrites its variables and prepares it: TriggerEnabled
-- in trigger.c), so the long WHEN of 0011 cost about 150,000 instructions per
-- UPDATE of jobs, and the workflow trigger's about 120,000 more: 18 % of a plain
-- job's finish-and-claim statement, more than the function calls the WHEN
-- saved. The function's IF is a PL/pgSQL simple expression, prepared once per
-- session. The pairs in it are rows of job_transitions (the invariant tests
-- check every pair against the table); any other change is looked up there,
-- as 0001's guard did. Dropping and creating a trigger takes a short ACCESS
-- EXCLUSIVE lock on jobs: no scan, no rewrite.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = NEW.status
       OR (OLD.status = 'queued' AND NEW.status = 'running')
       OR (OLD.status = 'running'
           AND NEW.status IN ('succeeded', 'failed', 'queued', 'canceled', 'skipped'))
       OR (OLD.status = 'waiting' AND NEW.status IN ('running', 'queued')) THEN
        RETURN NEW;
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM __SCHEMA__.job_transitions t
        WHERE t.from_status = OLD.status AND t.to_status = NEW.status
    ) THEN
        RAISE EXCEPTION 'queue-engine: job % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$;
DROP TRIGGER jobs_guard_transition ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_guard_transition
    BEFORE UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.jobs_guard_transition();

-- The last shard of a workflow closing ends the workflow. Shards close one at
-- a time on the workflow row (its lock is held to commit), so the closer of
-- the last one sees every other shard's counts committed.
CREATE FUNCTION __SCHEMA__.workflow_shard_done(p_workflow bigint) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    left_open integer;
    t         record;
BEGIN
    UPDATE __SCHEMA__.workflows SET open_shards = open_shards - 1
    WHERE id = p_workflow
    RETURNING open_shards INTO left_open;
    IF left_open = 0 THEN
        SELECT sum(x.failed) AS failed, sum(x.lost) AS lost, sum(x.canceled) AS canceled
        INTO t FROM __SCHEMA__.workflow_tallies x WHERE x.workflow_id = p_workflow;
        UPDATE __SCHEMA__.workflows w SET
            state = CASE
                WHEN w.cancel_requested THEN 'canceled'
                WHEN t.failed + t.lost > 0 THEN 'failed'
                WHEN t.canceled > 0 THEN 'canceled'
                ELSE 'succeeded' END,
            finished_at = now()
        WHERE w.id = p_workflow;
    END IF;
END;
$$;

-- The tally for the moves the trigger does not count itself (a node leaving a
-- final status, or moving between two); the close shared with the trigger.
CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_tally(
    p_workflow bigint, p_job bigint, p_from text, p_to text
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    was_final boolean := __SCHEMA__.workflow_final(p_from);
    now_final boolean := __SCHEMA__.workflow_final(p_to);
    left_open integer;
BEGIN
    UPDATE __SCHEMA__.workflow_tallies x SET
        unfinished = x.unfinished + (CASE WHEN was_final THEN 1 ELSE 0 END)
                                  - (CASE WHEN now_final THEN 1 ELSE 0 END),
        succeeded = x.succeeded + (p_to = 'succeeded')::int - (p_from = 'succeeded')::int,
        failed    = x.failed    + (p_to = 'failed')::int    - (p_from = 'failed')::int,
        canceled  = x.canceled  + (p_to = 'canceled')::int  - (p_from = 'canceled')::int,
        lost      = x.lost      + (p_to = 'lost')::int      - (p_from = 'lost')::int,
        skipped   = x.skipped   + (p_to = 'skipped')::int   - (p_from = 'skipped')::int
    FROM __SCHEMA__.workflows w
    WHERE w.id = p_workflow
      AND x.workflow_id = p_workflow AND x.shard = (p_job % w.shards)::int
    RETURNING x.unfinished INTO left_open;
    IF NOT FOUND THEN
        RETURN;  -- the workflow row is gone (pruned): nothing to count
    END IF;
    IF now_final AND NOT was_final AND left_open = 0 THEN
        PERFORM __SCHEMA__.workflow_shard_done(p_workflow);
    ELSIF was_final AND NOT now_final AND left_open = 1 THEN
        UPDATE __SCHEMA__.workflows SET
            open_shards = open_shards + 1, state = 'running', finished_at = NULL
        WHERE id = p_workflow;
    END IF;
END;
$$;

-- Queue the children whose last pending parent (or gate) the trigger's
-- statement just met: lock them by id, queue the ones at zero, write their
-- 'ready' events, wake their queues (one NOTIFY per queue). p_hits names a
-- child once per edge met (an ungated child), or once for its gate reaching zero.
CREATE FUNCTION __SCHEMA__.workflow_release_hits(
    p_hits bigint[], p_status text, p_node text, p_channel text
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    woken bigint;
BEGIN
    WITH child_locks AS MATERIALIZED (
        SELECT j.id FROM __SCHEMA__.jobs j
        WHERE j.id = ANY (p_hits) AND j.status = 'waiting'
        ORDER BY j.id
        FOR UPDATE
    ),
    released AS (
        UPDATE __SCHEMA__.jobs j SET
            pending_parents = j.pending_parents - h.n,
            status = CASE WHEN j.pending_parents = h.n AND j.task <> 'queue-engine:input'
                          THEN 'queued' ELSE j.status END,
            available_at = CASE WHEN j.pending_parents = h.n
                                THEN greatest(j.available_at, now())
                                     + CASE WHEN j.task = 'queue-engine:input'
                                            THEN make_interval(secs => coalesce(j.timeout_s, 0))
                                            ELSE interval '0' END
                                ELSE j.available_at END
        FROM (SELECT u.child_id, count(*)::int AS n
              FROM unnest(p_hits) AS u(child_id) GROUP BY u.child_id) h
        WHERE j.id = h.child_id AND j.id IN (SELECT cl.id FROM child_locks cl)
          AND j.status = 'waiting'
        RETURNING j.id, j.queue, j.status
    ),
    ready_events AS (
        INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
        SELECT r.id, 'ready', 'waiting', 'queued', 0,
               format('its last parent ended (node %s %s)', p_node, p_status)
        FROM released r WHERE r.status = 'queued'
    )
    SELECT count(*) INTO woken
    FROM (SELECT DISTINCT r.queue FROM released r WHERE r.status = 'queued') q,
         LATERAL (SELECT pg_notify(p_channel, q.queue)) n;
END;
$$;

-- A parent that ended badly (failed, canceled, lost or skipped): every waiting
-- child behind an edge that requires success, and every waiting descendant
-- behind such edges, is canceled (or skipped, for a skipped parent) in one
-- recursive statement, with a reason naming the upstream node. Their own ends
-- release their 'finished' edges through the trigger again, one level deeper.
CREATE FUNCTION __SCHEMA__.workflow_doom(p_parent bigint, p_status text, p_node text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    WITH RECURSIVE doomed(id) AS (
        SELECT d.child_id FROM __SCHEMA__.jobs c
        JOIN __SCHEMA__.job_deps d ON d.child_id = c.id
        WHERE d.parent_id = p_parent AND d.requires = 'succeeded' AND c.status = 'waiting'
        UNION
        SELECT d2.child_id
        FROM doomed x
        JOIN __SCHEMA__.job_deps d2 ON d2.parent_id = x.id AND d2.requires = 'succeeded'
        JOIN __SCHEMA__.jobs c2 ON c2.id = d2.child_id AND c2.status = 'waiting'
    ),
    locked AS MATERIALIZED (
        SELECT j.id FROM __SCHEMA__.jobs j
        WHERE j.id IN (SELECT dm.id FROM doomed dm) AND j.status = 'waiting'
        ORDER BY j.id
        FOR UPDATE
    ),
    ended AS (
        UPDATE __SCHEMA__.jobs j SET
            status = CASE WHEN p_status = 'skipped' THEN 'skipped' ELSE 'canceled' END,
            finished_at = now(),
            error = format('%s: upstream node %s %s',
                           CASE WHEN p_status = 'skipped' THEN 'skipped' ELSE 'canceled' END,
                           p_node, p_status)
        WHERE j.id IN (SELECT l.id FROM locked l) AND j.status = 'waiting'
        RETURNING j.id, j.status, j.error
    )
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
    SELECT e.id, e.status, 'waiting', e.status, 0, e.error FROM ended e;
END;
$$;

-- Kept for retry_workflow (0007), which calls it with p_bad_only to cancel or
-- skip what waits behind parents that stay failed. Releasing a node's children
-- (p_bad_only false) is the trigger's own statement since this migration.
CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_release(
    p_parent bigint, p_status text, p_node text, p_channel text, p_bad_only boolean
) RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF NOT p_bad_only THEN
        RAISE EXCEPTION 'queue-engine: a node''s children are released by the jobs_workflow_moved trigger (migration 0014)'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF p_status <> 'succeeded' THEN
        PERFORM __SCHEMA__.workflow_doom(p_parent, p_status, p_node);
    END IF;
END;
$$;

-- The trigger: a node's end (a move into a final status from one that is not)
-- is counted and released by one statement; the rest by the functions above.
-- The shard count is read by joining the workflow's row; a workflow row that
-- is gone (pruned) counts nothing, and its children are still released.
-- The gates are locked in (child, gate) order, as every release has done, so
-- concurrent parents of one fan-in neither deadlock nor lose a decrement. An
-- ungated child's status is read without a lock: one seen waiting is locked and
-- checked again by workflow_release_hits; one seen not waiting can no longer
-- need this edge (a workflow retry, the only path back to waiting, is refused
-- while a node of the workflow runs), e.g. a child this statement's finish
-- handed over.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_workflow_moved() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    was_final boolean := OLD.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped');
    now_final boolean := NEW.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped');
    left_open integer;
    hits      bigint[];
BEGIN
    IF NOT (was_final OR now_final) OR OLD.status = NEW.status THEN
        RETURN NULL;  -- a node's readiness, claim or retried attempt: nothing to count
    END IF;
    IF was_final OR NOT now_final THEN
        PERFORM __SCHEMA__.workflow_tally(NEW.workflow_id, NEW.id, OLD.status, NEW.status);
        RETURN NULL;
    END IF;
    WITH tally AS (
        UPDATE __SCHEMA__.workflow_tallies x SET
            unfinished = x.unfinished - 1,
            succeeded = x.succeeded + (NEW.status = 'succeeded')::int,
            failed    = x.failed    + (NEW.status = 'failed')::int,
            canceled  = x.canceled  + (NEW.status = 'canceled')::int,
            lost      = x.lost      + (NEW.status = 'lost')::int,
            skipped   = x.skipped   + (NEW.status = 'skipped')::int
        FROM __SCHEMA__.workflows w
        WHERE w.id = NEW.workflow_id
          AND x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % w.shards)::int
        RETURNING x.unfinished
    ),
    ok AS (
        SELECT d.child_id, d.gate
        FROM __SCHEMA__.job_deps d
        WHERE d.parent_id = NEW.id
          AND (NEW.status = 'succeeded' OR d.requires = 'finished')
    ),
    gate_locks AS MATERIALIZED (
        SELECT g.child_id, g.gate
        FROM __SCHEMA__.job_gates g JOIN ok ON ok.child_id = g.child_id AND ok.gate = g.gate
        ORDER BY g.child_id, g.gate
        FOR UPDATE OF g
    ),
    gated AS (
        UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
        FROM gate_locks l
        WHERE g.child_id = l.child_id AND g.gate = l.gate
        RETURNING g.child_id, g.pending
    )
    SELECT (SELECT t.unfinished FROM tally t),
           (SELECT array_agg(x.child_id) FROM (
                SELECT ok.child_id FROM ok
                JOIN __SCHEMA__.jobs c ON c.id = ok.child_id AND c.status = 'waiting'
                WHERE ok.gate IS NULL
                UNION ALL
                SELECT gd.child_id FROM gated gd WHERE gd.pending = 0) x)
    INTO left_open, hits;
    IF left_open = 0 THEN
        PERFORM __SCHEMA__.workflow_shard_done(NEW.workflow_id);
    END IF;
    IF hits IS NOT NULL THEN
        PERFORM __SCHEMA__.workflow_release_hits(hits, NEW.status, NEW.node,
                                                 TG_TABLE_SCHEMA || '.jobs');
    END IF;
    IF NEW.status <> 'succeeded' THEN
        PERFORM __SCHEMA__.workflow_doom(NEW.id, NEW.status, NEW.node);
    END IF;
    RETURN NULL;
END;
$$;

-- The smallest WHEN that keeps plain jobs out (see the guard above for what a
-- WHEN costs): a node's every status change now calls the function, which
-- returns at once for the ones that count nothing (its readiness, its claim,
-- a retried attempt).
DROP TRIGGER jobs_workflow_moved ON __SCHEMA__.jobs;
CREATE TRIGGER jobs_workflow_moved
    AFTER UPDATE OF status ON __SCHEMA__.jobs
    FOR EACH ROW WHEN (NEW.workflow_id IS NOT NULL)
    EXECUTE FUNCTION __SCHEMA__.jobs_workflow_moved();
