-- queue-engine: undo 0025_jobs_fillfactor (0001's fillfactor 70 again).
ALTER TABLE __SCHEMA__.jobs SET (fillfactor = 70);
