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
