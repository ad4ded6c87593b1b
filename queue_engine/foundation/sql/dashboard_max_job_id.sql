-- The newest job id (the primary key's last entry): where a filtered search of
-- the dashboard's jobs list starts when no page position is given.
SELECT max(j.id) FROM __SCHEMA__.jobs_all j
