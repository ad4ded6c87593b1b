-- start_workflow as 0028 wrote it (before the columns go).
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
           coalesce(e.v ->> 'queue', d.queue, b.queue),
           coalesce(e.v -> 'args', '{}'::jsonb),
           coalesce((e.v ->> 'priority')::smallint, d.priority, b.priority),
           coalesce((e.v ->> 'run_at')::timestamptz,
                    now() + make_interval(secs => coalesce((e.v ->> 'delay_s')::float8, 0)))
             + CASE WHEN e.np = 0 AND e.v ->> 'task' = 'queue-engine:input'
                    THEN make_interval(secs => coalesce((e.v ->> 'timeout_s')::int, 0))
                    ELSE interval '0' END,
           coalesce((e.v ->> 'max_attempts')::int, d.max_attempts, b.max_attempts),
           coalesce((e.v ->> 'timeout_s')::int, d.timeout_s, b.timeout_s),
           coalesce((e.v ->> 'lease_ttl_s')::int, d.lease_ttl_s, b.lease_ttl_s),
           e.v ->> 'lock_key', e.v ->> 'partition_key',
           coalesce(e.v ->> 'producer', p_producer), e.v ->> 'affinity_key',
           CASE WHEN o.children = 1 THEN ids[o.child] END,
           CASE WHEN o.children = 1 THEN o.gate END
    FROM (SELECT v, ord, jsonb_array_length(coalesce(v -> 'after', '[]'::jsonb)) AS np
          FROM jsonb_array_elements(p_nodes) WITH ORDINALITY AS x(v, ord)) e
    LEFT JOIN (SELECT u.parent, count(*) AS children, min(u.child) AS child, min(u.gate) AS gate
               FROM unnest(e_parent, e_child, e_gate) AS u(parent, child, gate)
               GROUP BY u.parent) o ON o.parent = e.ord
    -- The task's defaults for what a node leaves out (0028): a node naming
    -- "defaults_of" (the Python client: null when it filled them from its own
    -- declaration) is looked up by that; any other node by its task.
    CROSS JOIN __SCHEMA__.builtin_task_defaults() AS b
    LEFT JOIN __SCHEMA__.task_defaults d
        ON d.task = CASE WHEN e.v ? 'defaults_of' THEN e.v ->> 'defaults_of' ELSE e.v ->> 'task' END
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

-- queue-engine: undo 0031_concurrency_limits. Jobs lose their concurrency key
-- and limit (they run unlimited), and the operators' limits are dropped.
DROP FUNCTION __SCHEMA__.concurrency_free(text, integer);
DROP TABLE __SCHEMA__.concurrency_limits;
DROP INDEX __SCHEMA__.jobs_running_concurrency_key_idx;
-- jobs_all cannot lose columns in place: made again as 0027 made it, with
-- the grants it had (every role that may read jobs).
DROP VIEW __SCHEMA__.jobs_all;
ALTER TABLE __SCHEMA__.jobs
    DROP COLUMN concurrency_key,
    DROP COLUMN concurrency_limit;
ALTER TABLE __SCHEMA__.jobs_archive
    DROP COLUMN concurrency_key,
    DROP COLUMN concurrency_limit;
CREATE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;
COMMENT ON VIEW __SCHEMA__.jobs_all IS
    'Every job: jobs (live, unsuccessful, keyed, workflow nodes, recently succeeded) and jobs_archive.';
DO $grants$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type = 'SELECT' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON __SCHEMA__.jobs_all TO %s', grantee);
    END LOOP;
END
$grants$;
