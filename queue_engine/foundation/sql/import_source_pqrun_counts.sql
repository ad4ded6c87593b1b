-- queue-ctl import --from pqrun: how many jobs pqrun holds in each status
-- (what a dry run reports, finished ones as "not moved"). The first statement
-- the importer sends: a source without pqrun's `jobs` table fails here.
SELECT 'job' AS kind, j.status::text AS status, count(*) AS n
FROM jobs j
GROUP BY j.status
ORDER BY 2
