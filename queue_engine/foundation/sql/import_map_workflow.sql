-- queue-ctl import: record one imported workflow run (queue_workflows) in the
-- id map, in the transaction that started the workflow; nothing when the run
-- is already mapped (the caller checked in this transaction, so a second
-- importer running at once is the only way here, and it loses cleanly).
INSERT INTO __SCHEMA__.imported_ids (source, kind, old_id, new_id)
VALUES (%(source)s::text, 'workflow', %(old_id)s::text, %(new_id)s::bigint)
ON CONFLICT DO NOTHING
RETURNING new_id
