-- The engine's id of a job imported from dataloader, by its old job_id (a UUID
-- as lowercase text, as Postgres prints a uuid): the map `queue-ctl import
-- --from dataloader` writes (migration 0029). No row: no such imported job.
SELECT new_id FROM __SCHEMA__.imported_ids
WHERE source = 'dataloader' AND kind = 'job' AND old_id = %(old_id)s
