-- Workflows newest first, optionally of one state and/or name, before a keyset
-- cursor (%(before_id)s): an index scan of the primary key, counts per row from
-- its tally shards.
SELECT w.id, w.name, w.state, w.node_count, w.idempotency_key, w.producer, w.schedule,
       w.cancel_requested, w.created_at, w.finished_at,
       t.unfinished, t.succeeded, t.failed, t.canceled, t.lost, t.skipped
FROM __SCHEMA__.workflows w
CROSS JOIN LATERAL __SCHEMA__.workflow_counts(w.id) t
WHERE (%(state)s::text IS NULL OR w.state = %(state)s::text)
  AND (%(name)s::text IS NULL OR w.name = %(name)s::text)
  AND (%(before_id)s::bigint IS NULL OR w.id < %(before_id)s::bigint)
ORDER BY w.id DESC
LIMIT %(limit)s
