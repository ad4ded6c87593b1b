-- queue-ctl import: which of these old ids (%(old_ids)s, text[]) of one
-- source and kind are already in the id map. A dry run counts them apart
-- ("already imported"), and a workflow run imported before is not read again.
SELECT m.old_id, m.new_id
FROM __SCHEMA__.imported_ids m
WHERE m.source = %(source)s::text AND m.kind = %(kind)s::text
  AND m.old_id = ANY (%(old_ids)s::text[])
