-- queue-engine: a node's end runs the trigger's statements it needs, not one
-- statement for every case. __SCHEMA__ is replaced by the quoted engine schema
-- name. Design: docs/internals/workflows.md, "What a node's end costs".
--
-- 0014's trigger counted a node's end and released its children in one
-- statement of four CTEs (the tally shard, the node's edges, its gates locked
-- in order, the gates' decrement) whatever the node's edges were. Postgres
-- initialises every node of that plan at each execution (five tables and their
-- indexes opened, each CTE's tuple descriptors built): about 0.18 million of the
-- statement's 0.35 million instructions per node end, most of it for CTEs a
-- chain link or a fan's part leaves empty.
--
-- Now the tally is its own UPDATE, then one read of the node's edges decides:
--   * one edge through a gate (a fan's part, the common wide fan-in): one
--     UPDATE of that gate row. A single row needs no lock order, so no
--     explicit lock first;
--   * one edge, no gate (a chain link): is the child still waiting?
--   * more edges: 0014's statement as it was (gates locked in the fixed
--     order, so two parents sharing children never deadlock);
--   * no edge (a leaf): nothing more.
-- Same counts, same hits, same calls of workflow_shard_done,
-- workflow_release_hits and workflow_doom; the locks are taken in the same
-- order as before (the tally shard, then gates, then children). Measured
-- (bench/workflow_cost.py, server instructions per node's statement): chain
-- link 1,740,257 -> 1,621,416, fan part 1,816,619 -> 1,663,971 (bench/README.md,
-- "A node's end in the statements it needs"). CREATE OR REPLACE of the
-- function only: no lock on jobs.
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
    edges     bigint;
    gated     bigint;
    one_child bigint;
    one_gate  smallint;
    left_in   integer;
BEGIN
    IF NOT (was_final OR now_final) OR OLD.status = NEW.status THEN
        RETURN NULL;  -- a node's readiness, claim or retried attempt: nothing to count
    END IF;
    IF was_final OR NOT now_final THEN
        PERFORM __SCHEMA__.workflow_tally(NEW.workflow_id, NEW.id, OLD.status, NEW.status);
        RETURN NULL;
    END IF;
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
    RETURNING x.unfinished INTO left_open;
    SELECT count(*), count(d.gate), min(d.child_id), min(d.gate)
    INTO edges, gated, one_child, one_gate
    FROM __SCHEMA__.job_deps d
    WHERE d.parent_id = NEW.id
      AND (NEW.status = 'succeeded' OR d.requires = 'finished');
    IF edges = 1 AND gated = 1 THEN
        UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
        WHERE g.child_id = one_child AND g.gate = one_gate
        RETURNING g.pending INTO left_in;
        IF left_in = 0 THEN
            hits := ARRAY[one_child];
        END IF;
    ELSIF edges = 1 THEN
        IF EXISTS (SELECT 1 FROM __SCHEMA__.jobs c
                   WHERE c.id = one_child AND c.status = 'waiting') THEN
            hits := ARRAY[one_child];
        END IF;
    ELSIF edges > 1 THEN
        WITH ok AS (
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
        gate_hits AS (
            UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
            FROM gate_locks l
            WHERE g.child_id = l.child_id AND g.gate = l.gate
            RETURNING g.child_id, g.pending
        )
        SELECT array_agg(x.child_id) INTO hits FROM (
            SELECT ok.child_id FROM ok
            JOIN __SCHEMA__.jobs c ON c.id = ok.child_id AND c.status = 'waiting'
            WHERE ok.gate IS NULL
            UNION ALL
            SELECT gh.child_id FROM gate_hits gh WHERE gh.pending = 0) x;
    END IF;
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
