-- Keep the claim index clean on a big jobs table: vacuum jobs after a fixed
-- number of dead rows, and always vacuum its indexes.
--
-- Each claim and each finish is a non-HOT update (status is in the partial
-- indexes' predicates), so every job claimed leaves a dead entry at the head
-- of its queue's range in jobs_claimable_idx until a vacuum removes it; the
-- next claims walk over those entries. Two things kept them there on a big
-- table (bench/README.md, "What is not flat, and why"):
--
--   * 0001's autovacuum_vacuum_scale_factor = 0.01 waits for 1 % of the table
--     to be dead: 110,000 rows at 11 million jobs, against about 1,000 on a
--     small table. A fixed threshold makes the wait the same at any size.
--   * Even then, VACUUM skips the index pass when the heap pages with dead
--     rows are under 2 % of the table (Postgres's index-vacuum bypass): a
--     drain's dead rows sit on a few thousand pages of an 800,000-page table,
--     so the claim index was never cleaned (the server log said "index scan
--     bypassed" on every autovacuum of the 10M bench table, and the claim's
--     index scan read 260 buffers to find one job). vacuum_index_cleanup = on
--     turns the bypass off for this table.
--
-- The price: every autovacuum of jobs reads each of its indexes in full
-- (about 55 MB of index per million jobs kept; at 11 million jobs 0.33-0.42 s
-- of CPU per autovacuum on the bench machine), at most once per
-- autovacuum_naptime while jobs are claimed (docs/operations.md, "Big tables").
--
-- ALTER TABLE ... SET of these options takes a SHARE UPDATE EXCLUSIVE lock for
-- a moment and rewrites nothing: workers and producers are not blocked, on a
-- table of any size (a running autovacuum of jobs is cancelled by the wait).
ALTER TABLE __SCHEMA__.jobs SET (
    vacuum_index_cleanup = on,
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 1000
);
