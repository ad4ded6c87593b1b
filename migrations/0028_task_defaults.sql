-- queue-engine: a task's defaults apply wherever its jobs come from (issue 33).
-- __SCHEMA__ is replaced by the quoted engine schema name. Guide:
-- docs/guides/enqueueing.md ("Where a job's defaults come from").
--
-- Why. @task("email.send", queue="email", max_attempts=3) lived in the Python
-- process that imported the app: a job of that task enqueued by queue-ctl,
-- the HTTP API, another language or plain SQL went to queue "default" with 5
-- attempts. Now every worker publishes its registry when it starts, and every
-- enqueue path fills what its caller left unset from what was published:
--
--   task_publications  one row per task per worker that published it: what
--                      that worker's code declares, and who it is. Deleted
--                      with the worker's row (the orchestrator prunes rows of
--                      workers gone for QUEUE_ENGINE_RETENTION_WORKERS).
--   task_defaults      one row per task: the newest publication, which is what
--                      enqueue applies. It stays when its workers are gone, so
--                      a task whose workers are scaled to zero keeps its
--                      defaults until a worker publishes again.
--   builtin_task_defaults()  the one place the built-in defaults ('default',
--                      100, 5, no timeout, the worker's lease) are written in
--                      SQL;
--   task_defaults_of(task)  the task's published defaults, or the built-in ones.
--
-- Which value wins, per column (queue, priority, max_attempts, timeout_s,
-- lease_ttl_s): the caller's; else, for a producer that imported the task,
-- its own declaration (the Python client fills it before sending); else the
-- published defaults; else the built-in ones. The engine's enqueue statements
-- (queue_engine/sql/enqueue*.sql, the follow-ups of finish_and_claim_jobs.sql),
-- start_workflow and the SQL function enqueue() look task_defaults up
-- themselves (one probe per statement or per follow-up, a hash join for a
-- bulk insert or a workflow's nodes); they never insert a row with queue,
-- priority or max_attempts NULL.
--
-- A plain INSERT into jobs that leaves queue, priority or max_attempts out
-- (or NULL) is filled by the row-rules trigger instead: those three columns
-- lose their DEFAULT (a NULL is how the trigger knows the column was left
-- out; NOT NULL still holds after the BEFORE triggers), and jobs_row_rules()
-- fills each of the five columns that is NULL. A plain INSERT that names all
-- three is taken as complete: its NULL timeout_s and lease_ttl_s stay NULL
-- (the worker's settings).
--
-- Online-safety: two new, empty tables; ALTER COLUMN ... DROP DEFAULT takes a
-- brief ACCESS EXCLUSIVE lock on jobs (catalog only, nothing is scanned or
-- rewritten); the functions are replaced in the same transaction. Producers
-- of the build before keep working: they send every column.

CREATE TABLE __SCHEMA__.task_defaults (
    task            text        PRIMARY KEY,
    queue           text        NOT NULL,
    priority        smallint    NOT NULL,
    max_attempts    integer     NOT NULL,
    timeout_s       integer,
    lease_ttl_s     integer,
    -- Shown by `queue-ctl tasks`, never applied to a job: the worker that runs
    -- a job imported its task, and retries and watches it by its own code.
    stall_timeout_s integer,
    retry           jsonb,
    -- The publication this row is: the worker (workers.id), where it ran, the
    -- app module it imported, and when.
    worker_id       text        NOT NULL,
    host            text        NOT NULL,
    pid             integer     NOT NULL,
    app             text,
    published_at    timestamptz NOT NULL DEFAULT now(),
    -- The rules of a jobs row (0017's jobs_row_rules) for these columns, so a
    -- hand-written row here cannot make every enqueue of its task fail.
    CONSTRAINT task_defaults_task_check CHECK
        (task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$' AND char_length(task) <= 128),
    CONSTRAINT task_defaults_queue_check CHECK
        (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$' AND char_length(queue) <= 64),
    CONSTRAINT task_defaults_priority_check CHECK (priority BETWEEN 0 AND 1000),
    CONSTRAINT task_defaults_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT task_defaults_timeout_check CHECK (timeout_s BETWEEN 1 AND 604800),
    CONSTRAINT task_defaults_lease_ttl_check CHECK (lease_ttl_s BETWEEN 1 AND 86400),
    CONSTRAINT task_defaults_stall_timeout_check CHECK (stall_timeout_s BETWEEN 1 AND 604800)
);
COMMENT ON TABLE __SCHEMA__.task_defaults IS
    'Per task, the defaults of its newest publication by a worker: what enqueue applies to '
    'options its caller left unset (migration 0028).';

CREATE TABLE __SCHEMA__.task_publications (
    LIKE __SCHEMA__.task_defaults INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
    PRIMARY KEY (task, worker_id),
    FOREIGN KEY (worker_id) REFERENCES __SCHEMA__.workers (id) ON DELETE CASCADE
);
-- The cascade from a pruned worker row.
CREATE INDEX task_publications_worker_id_idx ON __SCHEMA__.task_publications (worker_id);
COMMENT ON TABLE __SCHEMA__.task_publications IS
    'What each worker declared for each task when it started; deleted with the worker''s row '
    '(migration 0028).';

-- The built-in defaults, written once in SQL (validation.py holds the same for
-- Python; tests/integration/test_task_defaults.py holds the two together).
-- Single-SELECT SQL functions, IMMUTABLE and STABLE: the planner inlines them
-- into the statement that calls them, so the built-ins become constants of
-- its plan and task_defaults_of a primary-key probe, with no function call.
CREATE FUNCTION __SCHEMA__.builtin_task_defaults()
RETURNS TABLE (queue text, priority smallint, max_attempts integer, timeout_s integer,
               lease_ttl_s integer)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'default'::text, 100::smallint, 5, NULL::integer, NULL::integer
$$;
COMMENT ON FUNCTION __SCHEMA__.builtin_task_defaults() IS
    'The defaults of a job whose task no worker has published and whose producer set none: '
    'queue default, priority 100, 5 attempts, the worker''s timeout and lease (migration 0028).';

CREATE FUNCTION __SCHEMA__.task_defaults_of(p_task text)
RETURNS TABLE (queue text, priority smallint, max_attempts integer, timeout_s integer,
               lease_ttl_s integer)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(d.queue, b.queue), coalesce(d.priority, b.priority),
           coalesce(d.max_attempts, b.max_attempts), coalesce(d.timeout_s, b.timeout_s),
           coalesce(d.lease_ttl_s, b.lease_ttl_s)
    FROM __SCHEMA__.builtin_task_defaults() AS b
    LEFT JOIN __SCHEMA__.task_defaults d ON d.task = p_task
$$;
COMMENT ON FUNCTION __SCHEMA__.task_defaults_of(text) IS
    'The defaults enqueue applies to a job of the task: its published ones (task_defaults), '
    'else the built-in ones; always one row (migration 0028).';

ALTER TABLE __SCHEMA__.jobs
    ALTER COLUMN queue DROP DEFAULT,
    ALTER COLUMN priority DROP DEFAULT,
    ALTER COLUMN max_attempts DROP DEFAULT;

-- The row-rules trigger (0017, 0026) fills the defaults of a row that left
-- queue, priority or max_attempts out. In that function rather than a trigger
-- of its own: a trigger's WHEN is compiled for every statement (about 23,000
-- instructions, 7 % of a single enqueue), and a second trigger function is a
-- second call per row; the function already runs for every inserted row. Its
-- body is 0026's but for the block marked 0028.
CREATE OR REPLACE FUNCTION __SCHEMA__.jobs_row_rules() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    broken text;
    woke boolean;  -- pg_notify's void, unused
BEGIN
    -- The wake-up (0010's jobs_notify_insert before). An assignment, not
    -- PERFORM: plpgsql evaluates it as a simple expression, where PERFORM
    -- runs a query through the executor (about 8,000 instructions a row).
    -- One CASE rather than an IF and then the call: each expression with a
    -- non-immutable function (now(), pg_notify) costs a command-counter
    -- increment and a snapshot. A rule broken below raises, and the
    -- notification goes with the failed (sub)transaction.
    IF TG_OP = 'INSERT' THEN
        -- The task's defaults (0028) for a row that left queue, priority or
        -- max_attempts out: filled before the wake-up (which names the queue)
        -- and the rules read them. The engine's statements send all three, so
        -- for them this is one test of three NULLs; the lookup runs only for
        -- a plain INSERT (or COPY) that relies on the defaults.
        IF NEW.queue IS NULL OR NEW.priority IS NULL OR NEW.max_attempts IS NULL THEN
            SELECT coalesce(NEW.queue, d.queue), coalesce(NEW.priority, d.priority),
                   coalesce(NEW.max_attempts, d.max_attempts),
                   coalesce(NEW.timeout_s, d.timeout_s), coalesce(NEW.lease_ttl_s, d.lease_ttl_s)
            INTO NEW.queue, NEW.priority, NEW.max_attempts, NEW.timeout_s, NEW.lease_ttl_s
            FROM __SCHEMA__.task_defaults_of(NEW.task) AS d;
        END IF;
        woke := CASE WHEN NEW.status = 'queued' AND NEW.available_at <= now()
                     THEN pg_notify(TG_TABLE_SCHEMA || '.jobs', NEW.queue) IS NULL END;
    END IF;
    -- The common case first. plpgsql builds an expression's executable state
    -- on its first use in each transaction (a function lookup and permission
    -- check per operator), so a row whose optional columns are all NULL (the
    -- usual enqueue, claim and finish) is decided by two small expressions
    -- and never builds the one over the optional columns.
    IF coalesce(jsonb_typeof(NEW.args) = 'object', true)
       AND coalesce(NEW.attempt >= 0 AND NEW.max_attempts BETWEEN 1 AND 1000, true)
       AND coalesce(NEW.priority BETWEEN 0 AND 1000, true)
       AND coalesce(NEW.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                    AND char_length(NEW.queue) <= 64, true)
       AND coalesce(NEW.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                 'canceled', 'lost', 'skipped'), true)
       AND coalesce(NEW.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                    AND char_length(NEW.task) <= 128, true) THEN
        IF NEW.affinity_key IS NULL AND NEW.idempotency_key IS NULL AND NEW.dedupe_key IS NULL
           AND NEW.lock_key IS NULL AND NEW.partition_key IS NULL AND NEW.producer IS NULL
           AND NEW.lease_ttl_s IS NULL AND NEW.timeout_s IS NULL AND NEW.node IS NULL
           AND NEW.workflow_id IS NULL THEN
            RETURN NEW;
        END IF;
        IF coalesce(char_length(NEW.affinity_key) BETWEEN 1 AND 255, true)
           AND coalesce(char_length(NEW.idempotency_key) BETWEEN 1 AND 255
                        AND char_length(NEW.dedupe_key) BETWEEN 1 AND 255
                        AND char_length(NEW.lock_key) BETWEEN 1 AND 255
                        AND char_length(NEW.partition_key) BETWEEN 1 AND 255
                        AND char_length(NEW.producer) BETWEEN 1 AND 255, true)
           AND coalesce(NEW.lease_ttl_s IS NULL OR NEW.lease_ttl_s BETWEEN 1 AND 86400, true)
           AND coalesce(NEW.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                        AND char_length(NEW.node) <= 128, true)
           AND coalesce(NEW.timeout_s IS NULL OR NEW.timeout_s BETWEEN 1 AND 604800, true)
           AND coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true) THEN
            RETURN NEW;
        END IF;
    END IF;
    -- A rule is broken: name the first, each test as the constraint of
    -- 0001/0004/0007 it replaces, in the order Postgres checked them.
    IF NOT coalesce(char_length(NEW.affinity_key) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_affinity_key_check';
    ELSIF NOT coalesce(jsonb_typeof(NEW.args) = 'object', true) THEN
        broken := 'jobs_args_object_check';
    ELSIF NOT coalesce(NEW.attempt >= 0 AND NEW.max_attempts BETWEEN 1 AND 1000, true) THEN
        broken := 'jobs_attempts_check';
    ELSIF NOT coalesce(char_length(NEW.idempotency_key) BETWEEN 1 AND 255
                       AND char_length(NEW.dedupe_key) BETWEEN 1 AND 255
                       AND char_length(NEW.lock_key) BETWEEN 1 AND 255
                       AND char_length(NEW.partition_key) BETWEEN 1 AND 255
                       AND char_length(NEW.producer) BETWEEN 1 AND 255, true) THEN
        broken := 'jobs_keys_length_check';
    ELSIF NOT coalesce(NEW.lease_ttl_s IS NULL OR NEW.lease_ttl_s BETWEEN 1 AND 86400, true) THEN
        broken := 'jobs_lease_ttl_check';
    ELSIF NOT coalesce(NEW.node ~ '^[A-Za-z0-9_][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.node) <= 128, true) THEN
        broken := 'jobs_node_check';
    ELSIF NOT coalesce(NEW.priority BETWEEN 0 AND 1000, true) THEN
        broken := 'jobs_priority_check';
    ELSIF NOT coalesce(NEW.queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.queue) <= 64, true) THEN
        broken := 'jobs_queue_check';
    ELSIF NOT coalesce(NEW.status IN ('waiting', 'queued', 'running', 'succeeded', 'failed',
                                    'canceled', 'lost', 'skipped'), true) THEN
        broken := 'jobs_status_check';
    ELSIF NOT coalesce(NEW.task ~ '^[A-Za-z_][A-Za-z0-9_.:-]*$'
                       AND char_length(NEW.task) <= 128, true) THEN
        broken := 'jobs_task_check';
    ELSIF NOT coalesce(NEW.timeout_s IS NULL OR NEW.timeout_s BETWEEN 1 AND 604800, true) THEN
        broken := 'jobs_timeout_check';
    ELSIF NOT coalesce((NEW.workflow_id IS NULL) = (NEW.node IS NULL), true) THEN
        broken := 'jobs_workflow_node_check';
    ELSE
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'new row for relation "jobs" violates check constraint "%"', broken
        USING ERRCODE = 'check_violation', CONSTRAINT = broken, TABLE = 'jobs';
END;
$$;

-- The SQL enqueue: same signature and answer as 0001's; p_queue, p_priority and
-- p_max_attempts default to NULL now, and every parameter left NULL among the
-- five takes the task's defaults (task_defaults_of), whichever the caller set.
CREATE OR REPLACE FUNCTION __SCHEMA__.enqueue(
    p_task text,
    p_args jsonb DEFAULT '{}'::jsonb,
    p_queue text DEFAULT NULL,
    p_priority integer DEFAULT NULL,
    p_run_at timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL,
    p_idempotency_key text DEFAULT NULL,
    p_dedupe_key text DEFAULT NULL,
    p_lock_key text DEFAULT NULL,
    p_timeout_s integer DEFAULT NULL,
    p_lease_ttl_s integer DEFAULT NULL,
    p_partition_key text DEFAULT NULL,
    p_producer text DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    new_id bigint;
BEGIN
    INSERT INTO __SCHEMA__.jobs (task, args, queue, priority, available_at, max_attempts,
                                 idempotency_key, dedupe_key, lock_key, timeout_s, lease_ttl_s,
                                 partition_key, producer)
    SELECT p_task, coalesce(p_args, '{}'::jsonb), coalesce(p_queue, d.queue),
           coalesce(p_priority, d.priority), coalesce(p_run_at, now()),
           coalesce(p_max_attempts, d.max_attempts), p_idempotency_key, p_dedupe_key,
           p_lock_key, coalesce(p_timeout_s, d.timeout_s), coalesce(p_lease_ttl_s, d.lease_ttl_s),
           p_partition_key, p_producer
    FROM __SCHEMA__.task_defaults_of(p_task) AS d
    ON CONFLICT DO NOTHING
    RETURNING id INTO new_id;
    IF new_id IS NULL THEN
        SELECT j.id INTO new_id FROM __SCHEMA__.jobs j
        WHERE (p_idempotency_key IS NOT NULL AND j.idempotency_key = p_idempotency_key)
           OR (p_dedupe_key IS NOT NULL AND j.dedupe_key = p_dedupe_key
               AND j.status IN ('queued', 'running'))
        ORDER BY (j.idempotency_key IS NOT DISTINCT FROM p_idempotency_key) DESC
        LIMIT 1;
    END IF;
    RETURN new_id;
END;
$$;

-- start_workflow: 0024's, but a node's queue, priority, max_attempts,
-- timeout_s and lease_ttl_s left out take its task's defaults (task_defaults
-- by hash join, then builtin_task_defaults) instead of 'default', 100 and 5.
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

-- Every role that may read or insert jobs (a monitor, a worker, a producer:
-- an enqueue looks the defaults up) may read both tables; every role that may
-- register a worker publishes (an upsert: it reads the row it replaces). As
-- 0027 did for jobs_all, so a deployment with the roles of `queue-ctl roles`
-- keeps working after this migration; sql/roles.sql grants the same to new roles.
DO $grants$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.jobs'::regclass
          AND a.privilege_type IN ('SELECT', 'INSERT') AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT ON __SCHEMA__.task_defaults, __SCHEMA__.task_publications TO %s',
                       grantee);
    END LOOP;
    FOR grantee IN
        SELECT DISTINCT a.grantee::regrole::text
        FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
        WHERE c.oid = '__SCHEMA__.workers'::regclass
          AND a.privilege_type = 'INSERT' AND a.grantee <> 0 AND a.grantee <> c.relowner
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE ON __SCHEMA__.task_defaults, '
                       '__SCHEMA__.task_publications TO %s', grantee);
    END LOOP;
END
$grants$;
