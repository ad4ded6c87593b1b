-- queue-engine: a workflow node's one child on its own row. __SCHEMA__ is
-- replaced by the quoted engine schema name. Design: docs/internals/workflows.md,
-- "What a node's end costs".
--
-- A node's end read its edges from job_deps (how many, through a gate or not,
-- the child and the gate) before it could take itself off its child's count:
-- one of the three statements the workflow trigger ran for a fan's part or a
-- chain's link. Edges never change after start_workflow, and most nodes have
-- exactly one child (every part of a fan-out/fan-in, every link of a chain),
-- so start_workflow now writes that child and its gate on the node's row
-- (jobs.only_child, jobs.only_child_gate; NULL: no child, several, or a node
-- started before 0024), and the trigger's common end (a node with one child
-- succeeded) takes them from NEW: the tally shard, then the gate or the
-- child's status, in the same order as before. Every other end (a failure, a
-- cancel, a node with no or several children, a node of a workflow started
-- before 0024) reads job_deps as 0023's trigger did. A fan's part went from
-- 1.50 to 1.43 million instructions, a chain's link from 1.49 to 1.42 (plain:
-- 1.24).
--
-- The columns are engine-internal, like pending_parents: start_workflow
-- writes them and nothing changes them (a retry keeps a workflow's edges).
-- A plain job leaves them NULL: no bytes (a row's header with its null bitmap
-- stays 32 bytes up to 72 columns) and no index.
--
-- Measured: bench/README.md, "A node's one child on its row".
-- Online-safety: ADD COLUMN without a default takes a brief ACCESS EXCLUSIVE
-- lock on jobs and rewrites nothing; CREATE OR REPLACE of two functions.

ALTER TABLE __SCHEMA__.jobs
    ADD COLUMN only_child bigint,
    ADD COLUMN only_child_gate smallint;
COMMENT ON COLUMN __SCHEMA__.jobs.only_child IS
    'A workflow node''s one child (job id), when it has exactly one (written by start_workflow '
    'since migration 0024); NULL: no child, several, a plain job, or a node started before 0024.';
COMMENT ON COLUMN __SCHEMA__.jobs.only_child_gate IS
    'The gate of only_child''s edge (a child of more than 16 parents counts them on 16 gates); '
    'NULL: the edge is counted on the child''s own row, or only_child is NULL.';

-- start_workflow: 0021's, with the edges derived once into arrays (job_deps'
-- rows and each node's only child both come from them) and the only child
-- written with the node.
CREATE OR REPLACE FUNCTION __SCHEMA__.start_workflow(
    p_name text, p_nodes jsonb, p_idempotency_key text DEFAULT NULL,
    p_producer text DEFAULT NULL, p_schedule text DEFAULT NULL
) RETURNS TABLE (workflow_id bigint, created boolean)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    wf      bigint;
    n       integer;
    n_shard integer;
    ids     bigint[];
    bad     text;
    e_parent integer[];   -- the edges, by position in p_nodes: parent, child,
    e_child  integer[];   -- the child's requirement of it, and its gate
    e_needs  text[];
    e_gate   smallint[];
BEGIN
    IF jsonb_typeof(p_nodes) IS DISTINCT FROM 'array' OR jsonb_array_length(p_nodes) < 1 THEN
        RAISE EXCEPTION 'queue-engine: a workflow needs a JSON array of at least one node'
            USING ERRCODE = 'check_violation';
    END IF;
    n := jsonb_array_length(p_nodes);
    -- Refuse, before writing anything: a repeated node name, an edge to a node
    -- that is not earlier in the list (unknown, itself, or later: a cycle), an
    -- edge given twice, an unknown requirement.
    WITH nodes AS (
        SELECT e.v ->> 'node' AS node, e.ord
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS e(v, ord)
    ),
    refs AS (
        SELECT c.v ->> 'node' AS child, c.ord AS child_ord, a.value ->> 'node' AS parent,
               coalesce(a.value ->> 'requires', 'succeeded') AS requires
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS c(v, ord)
        CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.v -> 'after', '[]'::jsonb)) AS a
    )
    SELECT x.problem INTO bad FROM (
        (SELECT format('node %s appears more than once', coalesce(nd.node, '(no name)')) AS problem
         FROM nodes nd GROUP BY nd.node HAVING count(*) > 1 OR nd.node IS NULL LIMIT 1)
        UNION ALL
        (SELECT format('node %s: after names %s, which is not an earlier node of this workflow',
                       r.child, coalesce(r.parent, '(no name)'))
         FROM refs r LEFT JOIN nodes p ON p.node = r.parent
         WHERE p.ord IS NULL OR p.ord >= r.child_ord LIMIT 1)
        UNION ALL
        (SELECT format('node %s: after names %s twice', r.child, r.parent)
         FROM refs r GROUP BY r.child, r.parent HAVING count(*) > 1 LIMIT 1)
        UNION ALL
        (SELECT format('node %s: requires must be succeeded or finished, not %s',
                       r.child, r.requires)
         FROM refs r WHERE r.requires NOT IN ('succeeded', 'finished') LIMIT 1)
    ) x LIMIT 1;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'queue-engine: %', bad USING ERRCODE = 'check_violation';
    END IF;

    INSERT INTO __SCHEMA__.workflows (name, idempotency_key, node_count, shards, open_shards,
                                      producer, schedule)
    VALUES (p_name, p_idempotency_key, n, 16, least(16, n), p_producer, p_schedule)
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id INTO wf;
    IF wf IS NULL THEN
        RETURN QUERY SELECT w.id, false FROM __SCHEMA__.workflows w
                     WHERE w.idempotency_key = p_idempotency_key;
        RETURN;
    END IF;
    n_shard := 16;  -- always (0019): a node's shard is its id % 16, no lookup
    SELECT array_agg(nextval(pg_get_serial_sequence('__SCHEMA__.jobs', 'id')) ORDER BY g)
    INTO ids FROM generate_series(1, n) AS g;
    -- The edges, once (job_deps' rows and each node's only child come from
    -- them), in (parent, child) order, which is job_deps' key order: ids grow
    -- with the position. A child of more than 16 parents counts them through
    -- 16 gates, its k-th parent on gate (k - 1) % 16.
    SELECT array_agg(r.parent_ord ORDER BY r.parent_ord, r.child_ord),
           array_agg(r.child_ord ORDER BY r.parent_ord, r.child_ord),
           array_agg(r.requires ORDER BY r.parent_ord, r.child_ord),
           array_agg(r.gate ORDER BY r.parent_ord, r.child_ord)
    INTO e_parent, e_child, e_needs, e_gate
    FROM (
        SELECT p.ord::int AS parent_ord, c.ord::int AS child_ord,
               coalesce(a.value ->> 'requires', 'succeeded') AS requires,
               CASE WHEN jsonb_array_length(c.v -> 'after') > 16
                    THEN ((a.ord - 1) % 16)::smallint END AS gate
        FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS c(v, ord)
        CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.v -> 'after', '[]'::jsonb))
            WITH ORDINALITY AS a(value, ord)
        JOIN jsonb_array_elements(p_nodes) WITH ORDINALITY AS p(v, ord)
          ON p.v ->> 'node' = a.value ->> 'node'
    ) r;

    INSERT INTO __SCHEMA__.jobs (
        id, workflow_id, node, status, pending_parents, task, queue, args, priority,
        available_at, max_attempts, timeout_s, lease_ttl_s, lock_key, partition_key, producer,
        affinity_key, only_child, only_child_gate
    )
    SELECT ids[e.ord], wf, e.v ->> 'node',
           CASE WHEN e.np > 0 OR e.v ->> 'task' = 'queue-engine:input'
                THEN 'waiting' ELSE 'queued' END,
           least(e.np, 16),
           e.v ->> 'task',
           coalesce(e.v ->> 'queue', 'default'),
           coalesce(e.v -> 'args', '{}'::jsonb),
           coalesce((e.v ->> 'priority')::smallint, 100),
           coalesce((e.v ->> 'run_at')::timestamptz,
                    now() + make_interval(secs => coalesce((e.v ->> 'delay_s')::float8, 0)))
             + CASE WHEN e.np = 0 AND e.v ->> 'task' = 'queue-engine:input'
                    THEN make_interval(secs => coalesce((e.v ->> 'timeout_s')::int, 0))
                    ELSE interval '0' END,
           coalesce((e.v ->> 'max_attempts')::int, 5),
           (e.v ->> 'timeout_s')::int, (e.v ->> 'lease_ttl_s')::int,
           e.v ->> 'lock_key', e.v ->> 'partition_key',
           coalesce(e.v ->> 'producer', p_producer), e.v ->> 'affinity_key',
           CASE WHEN o.children = 1 THEN ids[o.child] END,
           CASE WHEN o.children = 1 THEN o.gate END
    FROM (SELECT v, ord, jsonb_array_length(coalesce(v -> 'after', '[]'::jsonb)) AS np
          FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS x(v, ord)) e
    LEFT JOIN (SELECT u.parent, count(*) AS children, min(u.child) AS child, min(u.gate) AS gate
               FROM unnest(e_parent, e_child, e_gate) AS u(parent, child, gate)
               GROUP BY u.parent) o ON o.parent = e.ord
    ORDER BY e.ord;
    INSERT INTO __SCHEMA__.workflow_node_ids (workflow_id, node, job_id)
    SELECT wf, e.v ->> 'node', ids[e.ord]
    FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS e(v, ord);

    WITH deps AS (
        INSERT INTO __SCHEMA__.job_deps (parent_id, child_id, requires, gate)
        SELECT ids[u.parent], ids[u.child], u.requires, u.gate
        FROM unnest(e_parent, e_child, e_needs, e_gate) AS u(parent, child, requires, gate)
        ORDER BY 1, 2
        RETURNING child_id, gate
    )
    INSERT INTO __SCHEMA__.job_gates (child_id, gate, pending)
    SELECT d.child_id, d.gate, count(*) FROM deps d WHERE d.gate IS NOT NULL
    GROUP BY d.child_id, d.gate;

    INSERT INTO __SCHEMA__.workflow_tallies (workflow_id, shard, unfinished)
    SELECT wf, (i % n_shard)::int, count(*) FROM unnest(ids) AS i GROUP BY 2;
    UPDATE __SCHEMA__.workflows w
    SET open_shards = (SELECT count(*) FROM __SCHEMA__.workflow_tallies t WHERE t.workflow_id = wf)
    WHERE w.id = wf;

    RETURN QUERY SELECT wf, true;
END;
$$;

-- The workflow trigger: 0023's, with the common end first, from NEW alone.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_workflow_moved() RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    was_final boolean;
    now_final boolean;
    left_open integer;
    hits      bigint[];
    edges     bigint;
    gated     bigint;
    one_child bigint;
    one_gate  smallint;
    left_in   integer;
    edge      record;
BEGIN
    -- The common end: a node with one child succeeded. Its edge is on its row
    -- (written by start_workflow since 0024, so its workflow has 16 shards).
    IF NEW.status = 'succeeded' AND NEW.only_child IS NOT NULL
       AND OLD.status NOT IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped') THEN
        UPDATE __SCHEMA__.workflow_tallies x
        SET unfinished = x.unfinished - 1, succeeded = x.succeeded + 1
        WHERE x.workflow_id = NEW.workflow_id AND x.shard = (NEW.id % 16)::int
        RETURNING x.unfinished INTO left_open;
        IF NEW.only_child_gate IS NOT NULL THEN
            UPDATE __SCHEMA__.job_gates g SET pending = g.pending - 1
            WHERE g.child_id = NEW.only_child AND g.gate = NEW.only_child_gate
            RETURNING g.pending INTO left_in;
            IF left_in = 0 THEN
                hits := ARRAY[NEW.only_child];
            END IF;
        ELSIF EXISTS (SELECT 1 FROM __SCHEMA__.jobs c
                      WHERE c.id = NEW.only_child AND c.status = 'waiting') THEN
            hits := ARRAY[NEW.only_child];
        END IF;
        IF left_open = 0 THEN
            PERFORM __SCHEMA__.workflow_shard_done(NEW.workflow_id);
        END IF;
        IF hits IS NOT NULL THEN
            PERFORM __SCHEMA__.workflow_release_hits(hits, NEW.status, NEW.node,
                                                     TG_TABLE_SCHEMA || '.jobs');
        END IF;
        RETURN NULL;
    END IF;
    -- Any other move into or out of an end: the edges from job_deps.
    was_final := OLD.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped');
    now_final := NEW.status IN ('succeeded', 'failed', 'canceled', 'lost', 'skipped');
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
