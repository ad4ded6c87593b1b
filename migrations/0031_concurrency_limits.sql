-- queue-engine: per-key concurrency limits enforced by the claim (issue 36, §1).
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. `lock_key` allows one running job per key. Users need N: at most three
-- loads against one source system, at most ten calls into one partner
-- account. The design is docs/internals/flow-control.md: a running row is the
-- slot (nothing to leak: the recovery that requeues a dead worker's job frees
-- its slot), and the claim statement checks the limit itself, with no extra
-- round trip and no effect on jobs that carry no key.
--
-- What.
-- - jobs.concurrency_key, jobs.concurrency_limit: the job's key and its own
--   limit (NULL, NULL for every plain job; adding nullable columns without a
--   default rewrites nothing). Their rules are checked by the enqueue paths
--   and by concurrency_free below, not by a CHECK: a CHECK on jobs is
--   evaluated on every claim and finish of every job (why 0017 folded the
--   checks into the insert trigger).
-- - A partial index of running keyed jobs: the claim counts a key's running
--   rows through it (at most the limit's number of entries per key).
-- - concurrency_limits: the limits operators set at runtime (`queue-ctl
--   limits set KEY N`), overriding the jobs' own.
-- - concurrency_free(key, limit): how many more jobs of the key may start now.
ALTER TABLE __SCHEMA__.jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer;

-- The archive keeps jobs' columns in jobs' order (the archiver moves rows with
-- SELECT *), and jobs_all, whose SELECT * was expanded when 0027 made it,
-- gains the two columns at its end (as 0027 says: a column added to jobs is
-- added to jobs_archive in the same migration and jobs_all recreated).
ALTER TABLE __SCHEMA__.jobs_archive
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer;
CREATE OR REPLACE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;

CREATE INDEX jobs_running_concurrency_key_idx ON __SCHEMA__.jobs (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status = 'running';

CREATE TABLE __SCHEMA__.concurrency_limits (
    key         text        PRIMARY KEY,
    max_running integer     NOT NULL,
    set_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT concurrency_limits_key_check CHECK (char_length(key) BETWEEN 1 AND 255),
    CONSTRAINT concurrency_limits_max_running_check CHECK (max_running BETWEEN 0 AND 10000)
);

-- How many more jobs of p_key may start now: the effective limit (the
-- operator's row, else p_limit, the candidate job's own) minus the key's
-- running jobs, at least 0; NULL when neither sets a limit.
--
-- Exact under races (docs/internals/flow-control.md): the claims of one key
-- are serialised by a transaction advisory lock, taken with a try so that a
-- claim never waits (a key being claimed by another transaction right now
-- counts as full: its jobs are skipped, like rows SKIP LOCKED skips) and no
-- order of keys can deadlock. The count runs after the lock is held, and a
-- VOLATILE function takes a new snapshot for each query (READ COMMITTED), so
-- it sees every claim of the key that committed before this one got the lock.
-- The lock space: the two-int4 form, keyed by a hash of this schema's limits
-- table's name, so two engine schemas in one database never share a key's
-- lock (a 32-bit hash collision between two keys only makes them take turns;
-- hashtext of a constant is folded when the function is planned).
CREATE FUNCTION __SCHEMA__.concurrency_free(p_key text, p_limit integer)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lim     integer;
    running integer;
BEGIN
    SELECT c.max_running INTO lim FROM __SCHEMA__.concurrency_limits c WHERE c.key = p_key;
    IF lim IS NULL THEN
        lim := p_limit;
    END IF;
    IF lim IS NULL THEN
        RETURN NULL;
    END IF;
    IF lim <= 0 OR NOT pg_try_advisory_xact_lock(
            hashtext('__SCHEMA__.concurrency_limits'), hashtext(p_key)) THEN
        RETURN 0;
    END IF;
    SELECT count(*) INTO running FROM __SCHEMA__.jobs r
    WHERE r.concurrency_key = p_key AND r.status = 'running';
    RETURN greatest(lim - running, 0);
END;
$$;

REVOKE ALL ON FUNCTION __SCHEMA__.concurrency_free(text, integer) FROM PUBLIC;

-- Every role that may read jobs may read the limits (queue-ctl limits list,
-- a monitor); every role that may update jobs (a worker: its claim calls
-- concurrency_free, which reads the limits as the owner) may run the
-- function. As 0029 did for imported_ids; sql/roles.sql grants the same to
-- new roles.
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
        EXECUTE format('GRANT SELECT ON __SCHEMA__.concurrency_limits TO %s', grantee);
    END LOOP;
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type = 'UPDATE' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION __SCHEMA__.concurrency_free(text, integer) TO %s',
                       grantee);
    END LOOP;
END
$grants$;

-- start_workflow: 0028's, and a node's concurrency_key and concurrency_limit
-- (the Python client's node JSON carries them when set): a workflow node is
-- claimed under its key's limit like any job. Nothing else changes.
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
        affinity_key, only_child, only_child_gate, concurrency_key, concurrency_limit
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
           CASE WHEN o.children = 1 THEN o.gate END,
           e.v ->> 'concurrency_key', (e.v ->> 'concurrency_limit')::int
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
