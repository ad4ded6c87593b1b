-- The old dataloader job_id of an imported job, by its id here (imported_ids_new_id_idx):
-- a trigger that finds the job already holding its idempotency key answers the
-- id its client knows. No row: the job was not imported.
SELECT old_id FROM __SCHEMA__.imported_ids
WHERE kind = 'job' AND new_id = %(new_id)s AND source = 'dataloader'
ORDER BY imported_at
LIMIT 1
