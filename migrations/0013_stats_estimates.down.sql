DROP STATISTICS IF EXISTS __SCHEMA__.jobs_queue_status_stats;
