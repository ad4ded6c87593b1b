-- queue-engine: the id map of imported jobs and workflows (issue 35).
-- __SCHEMA__ is replaced by the quoted engine schema name.
--
-- Why. A team moving from a system this engine replaces (dataloader, pqrun,
-- queue_workflows) runs `queue-ctl import --from SYSTEM`, which copies its
-- queued, delayed and running jobs and its unfinished workflows into this
-- engine. Their clients still hold the old ids (dataloader's job_id is a UUID
-- string), so every imported row is recorded here: the compatibility face
-- (`queue-web --compat dataloader`) answers an old id through this map, and a
-- second import of the same source row adds nothing (the primary key).
--
-- What. One row per imported job or workflow: the system it came from, what
-- it is, its id there (as text: a UUID, a bigint, a name) and its id here.
-- Nothing references jobs: a map row outlives a pruned job and then answers
-- 404 like any unknown id, and the importer never deletes anything.
CREATE TABLE __SCHEMA__.imported_ids (
    source text NOT NULL CHECK (source IN ('dataloader', 'pqrun', 'queue_workflows')),
    kind text NOT NULL CHECK (kind IN ('job', 'workflow')),
    old_id text NOT NULL CHECK (length(old_id) BETWEEN 1 AND 200),
    new_id bigint NOT NULL,
    imported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, kind, old_id)
);
CREATE INDEX imported_ids_new_id_idx ON __SCHEMA__.imported_ids (kind, new_id);

-- Every role that may read jobs (a producer reading its job's status, a
-- monitor) may read the map, as 0028 did for task_defaults, so a deployment
-- with the roles of `queue-ctl roles` keeps working after this migration;
-- sql/roles.sql grants the same to new roles. The importer runs as the owner.
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
        EXECUTE format('GRANT SELECT ON __SCHEMA__.imported_ids TO %s', grantee);
    END LOOP;
END
$grants$;
