-- queue-engine: the statements a node's end runs read jobs by id, whatever
-- plan the session made. __SCHEMA__ is replaced by the quoted engine schema
-- name. Design: docs/internals/workflows.md, "Plans on a young table".
--
-- A worker's session plans once (plan_cache_mode = force_generic_plan) with
-- enable_seqscan = off, and so do the functions its finish statement calls
-- through the workflow trigger: each keeps the plan it made the first time it
-- ran in the session, often while the tables were small. Three statements
-- joined a node's children to jobs (or job_gates), and a plan made on a small
-- table ran those joins as a nested loop reading all of the table for each
-- child: the release of a 3,000-part fan-out took 1.7 s (9 million rows read
-- and thrown away), a failed root's cancel of its descendants and a node with
-- several children the same way. Now every child is looked up by id:
--   workflow_release_hits: the UPDATE takes its rows by id = ANY (the locked
--     ids), not by a join with the locked rows;
--   workflow_doom: the walk reads each child's status by id and its edges by
--     parent (a lateral lookup the planner cannot turn into a join), the lock
--     and the UPDATE take their rows by id = ANY;
--   jobs_workflow_moved, a node with several children: the ungated children
--     by id = ANY, each gate by its key in a loop, in (child, gate) order (the
--     order 0014's explicit lock took them in).
-- Same results, same locks in the same order.
--
-- Online-safety: CREATE OR REPLACE of three functions; no table lock, no scan.
-- tests/integration/test_cold_plans_nested.py asserts the plans.

CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_release_hits(
    p_hits bigint[], p_status text, p_node text, p_channel text
) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    woken bigint;
    msg   text := format('its last parent ended (node %s %s)', p_node, p_status);
BEGIN
    -- p_hits holds distinct ids: one parent has one edge to a child (job_deps'
    -- key), and that edge takes one off the child, through its gate or not.
    WITH child_locks AS MATERIALIZED (
        SELECT j.id FROM __SCHEMA__.jobs j
        WHERE j.id = ANY (p_hits) AND j.status = 'waiting'
        ORDER BY j.id
        FOR UPDATE
    ),
    released AS (
        UPDATE __SCHEMA__.jobs j SET
            pending_parents = j.pending_parents - 1,
            status = CASE WHEN j.pending_parents = 1 AND j.task <> 'queue-engine:input'
                          THEN 'queued' ELSE j.status END,
            available_at = CASE WHEN j.pending_parents = 1
                                THEN greatest(j.available_at, now())
                                     + CASE WHEN j.task = 'queue-engine:input'
                                            THEN make_interval(secs => coalesce(j.timeout_s, 0))
                                            ELSE interval '0' END
                                ELSE j.available_at END
        WHERE j.id = ANY (ARRAY(SELECT cl.id FROM child_locks cl)) AND j.status = 'waiting'
        RETURNING j.id, j.queue, j.status
    ),
    ready_events AS (
        INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
        SELECT r.id, 'ready', 'waiting', 'queued', 0, msg
        FROM released r WHERE r.status = 'queued'
    )
    SELECT count(*) INTO woken
    FROM (SELECT DISTINCT r.queue FROM released r WHERE r.status = 'queued') q,
         LATERAL (SELECT pg_notify(p_channel, q.queue)) n;
END;
$$;

CREATE OR REPLACE FUNCTION __SCHEMA__.workflow_doom(p_parent bigint, p_status text, p_node text)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    WITH RECURSIVE doomed(id) AS (
        SELECT d.child_id FROM __SCHEMA__.job_deps d
        WHERE d.parent_id = p_parent AND d.requires = 'succeeded'
          AND (SELECT c.status FROM __SCHEMA__.jobs c WHERE c.id = d.child_id) = 'waiting'
        UNION
        SELECT d2.child_id
        FROM doomed x
        CROSS JOIN LATERAL (SELECT e.child_id FROM __SCHEMA__.job_deps e
                            WHERE e.parent_id = x.id AND e.requires = 'succeeded'
                            OFFSET 0) d2
        WHERE (SELECT c2.status FROM __SCHEMA__.jobs c2 WHERE c2.id = d2.child_id) = 'waiting'
    ),
    locked AS MATERIALIZED (
        SELECT j.id FROM __SCHEMA__.jobs j
        WHERE j.id = ANY (ARRAY(SELECT dm.id FROM doomed dm)) AND j.status = 'waiting'
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
        WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked l)) AND j.status = 'waiting'
        RETURNING j.id, j.status, j.error
    )
    INSERT INTO __SCHEMA__.job_events (job_id, kind, from_status, to_status, attempt, message)
    SELECT e.id, e.status, 'waiting', e.status, 0, e.error FROM ended e;
END;
$$;

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
    edge      record;
BEGIN
    IF NOT (was_final OR now_final) OR OLD.status = NEW.status THEN
        RETURN NULL;  -- a node's readiness, claim or retried attempt: nothing to count
    END IF;
    IF was_final OR NOT now_final THEN
        PERFORM __SCHEMA__.workflow_tally(NEW.workflow_id, NEW.id, OLD.status, NEW.status);
        RETURN NULL;
    END IF;
    IF NEW.workflow_id <= __SCHEMA__.workflow_few_shards_upto() THEN
        -- Started before 0019: it may have fewer shards (id % shards).
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
    ELSIF NEW.status = 'succeeded' THEN
        UPDATE __SCHEMA__.workflow_tallies x
        SET unfinished = x.unfinished - 1, succeeded = x.succeeded + 1
        WHERE x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % 16)::int
        RETURNING x.unfinished INTO left_open;
    ELSE
        UPDATE __SCHEMA__.workflow_tallies x SET
            unfinished = x.unfinished - 1,
            failed    = x.failed    + (NEW.status = 'failed')::int,
            canceled  = x.canceled  + (NEW.status = 'canceled')::int,
            lost      = x.lost      + (NEW.status = 'lost')::int,
            skipped   = x.skipped   + (NEW.status = 'skipped')::int
        WHERE x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % 16)::int
        RETURNING x.unfinished INTO left_open;
    END IF;
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
        -- Each child looked up by id (never a join with jobs or job_gates: a
        -- plan the session made on a small table read all of it per child).
        SELECT array_agg(c.id) INTO hits
        FROM __SCHEMA__.jobs c
        WHERE c.id = ANY (ARRAY(
                SELECT d.child_id FROM __SCHEMA__.job_deps d
                WHERE d.parent_id = NEW.id AND d.gate IS NULL
                  AND (NEW.status = 'succeeded' OR d.requires = 'finished')))
          AND c.status = 'waiting';
        -- Gates in (child, gate) order, each UPDATE locking its row: parents
        -- ending together take shared gates in the same order.
        FOR edge IN
            SELECT d.child_id, d.gate FROM __SCHEMA__.job_deps d
            WHERE d.parent_id = NEW.id AND d.gate IS NOT NULL
              AND (NEW.status = 'succeeded' OR d.requires = 'finished')
            ORDER BY d.child_id, d.gate
        LOOP
            UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
            WHERE g.child_id = edge.child_id AND g.gate = edge.gate
            RETURNING g.pending INTO left_in;
            IF left_in = 0 THEN
                hits := hits || edge.child_id;
            END IF;
        END LOOP;
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
