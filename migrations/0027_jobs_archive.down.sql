-- queue-engine: undo 0027_jobs_archive. Archived jobs go back to jobs first, so
-- nothing is lost (one statement: on a big archive, a long one).
INSERT INTO __SCHEMA__.jobs OVERRIDING SYSTEM VALUE SELECT * FROM __SCHEMA__.jobs_archive;
DROP VIEW __SCHEMA__.jobs_all;
DROP TABLE __SCHEMA__.jobs_archive;
