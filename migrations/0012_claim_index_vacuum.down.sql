-- Back to the autovacuum options of 0001 (the index-vacuum bypass allowed again).
ALTER TABLE __SCHEMA__.jobs RESET (vacuum_index_cleanup);
ALTER TABLE __SCHEMA__.jobs SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 500
);
