-- queue-engine: undo 0033_rate_limits_per_key. Jobs lose their weight, rated
-- keys their buckets (their jobs start as fast as workers take them).
DROP TRIGGER jobs_rate_spend ON __SCHEMA__.jobs;
DROP FUNCTION __SCHEMA__.rate_buckets_spend();
DROP FUNCTION __SCHEMA__.concurrency_free(text, integer, integer);
DROP TABLE __SCHEMA__.rate_buckets;
-- jobs_all cannot lose a column in place: made again as 0031's down does.
DROP VIEW __SCHEMA__.jobs_all;
ALTER TABLE __SCHEMA__.jobs DROP COLUMN weight;
ALTER TABLE __SCHEMA__.jobs_archive DROP COLUMN weight;
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
