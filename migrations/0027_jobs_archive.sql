-- queue-engine: succeeded jobs move to a table of their own (issue 15, scale).
-- __SCHEMA__ is replaced by the quoted engine schema name. Measured in
-- bench/README.md ("Finished jobs in a table of their own", 2026-11-27).
--
-- Why. A job writes three row versions in jobs (inserted queued, claimed,
-- finished); the first two die within seconds, the last lives for the
-- retention (7 days for succeeded jobs). So almost every page ends up holding
-- finished rows around the holes of dead versions, and VACUUM records each
-- hole in the free-space map. An INSERT takes the first page the map offers
-- with room for the row: after a million jobs run by real workers
-- (bench/heap_layout.py), 1,000 new jobs landed on 990 pages, one or two per
-- hole, each a page read and, the first time after a checkpoint, an 8 kB
-- full-page image (8.3 MB of WAL per 1,000 jobs instead of 0.3). On a table
-- of months of history those pages are cold, and bulk enqueue at 10 million
-- jobs was 1.8x slower than on an empty table.
--
-- What. The orchestrator's archiver (orchestrator/archiver.py, leader only)
-- moves succeeded jobs that finished QUEUE_ENGINE_ARCHIVE_AFTER_S ago (60 s by
-- default) from jobs to jobs_archive, in bounded batches of one statement
-- each. jobs then keeps live jobs, the last minute of succeeded ones and the
-- unsuccessful ones (failed, canceled, lost, skipped: what operators retry and
-- inspect); a page whose rows have all moved out is empty as a whole, and new
-- jobs fill empty pages. Not moved, so that nothing that writes or looks up a
-- finished job by anything but its id has to look in two tables: jobs with an
-- idempotency key (enqueue's uniqueness check reads jobs), workflow nodes
-- (their children read them; a finished workflow is pruned as a whole), and
-- jobs that did not succeed (retry puts them back in their queue).
--
-- Readers. jobs_all is jobs and jobs_archive as one relation (UNION ALL: a
-- row is in exactly one of them; a move is one statement, so every snapshot
-- sees it in one). Every statement that reads a job by id or lists finished
-- jobs reads jobs_all; the claim, the finish and everything about live jobs
-- keep reading jobs alone. A column added to jobs later must be added to
-- jobs_archive in the same migration and jobs_all recreated (its SELECT *
-- was expanded now); tests/integration/test_jobs_archive.py checks the two
-- tables have the same columns.
--
-- Online-safety: creates an empty table, its indexes and a view; on jobs it
-- takes only ACCESS SHARE locks (reading its definition, as a SELECT does),
-- which no claim or finish waits for. An existing history is moved by the
-- archiver afterwards, a batch at a time (at most 20 statements of
-- 1,000 rows per run, then a 1 s pause while rows are left: about 20,000
-- jobs/s, and 1.6 kB of WAL per job moved, measured at 10 million jobs).
CREATE TABLE __SCHEMA__.jobs_archive (LIKE __SCHEMA__.jobs INCLUDING DEFAULTS)
    WITH (fillfactor = 100);
ALTER TABLE __SCHEMA__.jobs_archive ADD PRIMARY KEY (id);
-- Retention (prune_archive.sql), stats, the dashboard's done/min, metrics.
CREATE INDEX jobs_archive_finished_at_idx ON __SCHEMA__.jobs_archive (finished_at);
COMMENT ON TABLE __SCHEMA__.jobs_archive IS
    'Succeeded jobs moved out of jobs by the archiver (migration 0027); read through jobs_all.';

CREATE VIEW __SCHEMA__.jobs_all AS
    SELECT * FROM __SCHEMA__.jobs
    UNION ALL
    SELECT * FROM __SCHEMA__.jobs_archive;
COMMENT ON VIEW __SCHEMA__.jobs_all IS
    'Every job: jobs (live, unsuccessful, keyed, workflow nodes, recently succeeded) and jobs_archive.';

-- A role that may read jobs (queue-ctl roles: worker, producer, monitor, or
-- the operator's own) may read jobs_all; the view reads both tables with its
-- owner's rights, so jobs_archive needs no grant of its own.
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
