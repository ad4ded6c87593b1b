-- Workflows newest first, optionally of one state and/or name, before a keyset
-- cursor (%(before_id)s): an index scan of the primary key, counts per row from
-- its tally shards.
SELECT w.id, w.name, w.state, w.node_count, w.idempotency_key, w.producer, w.schedule,
       w.cancel_requested, w.created_at, w.finished_at,
       t.unfinished, t.succeeded, t.failed, t.canceled, t.lost, t.skipped
FROM __SCHEMA__.workflows w
CROSS JOIN LATERAL (
    SELECT sum(x.unfinished) AS unfinished, sum(x.succeeded) AS succeeded,
           sum(x.failed) AS failed, sum(x.canceled) AS canceled, sum(x.lost) AS lost,
           sum(x.skipped) AS skipped
    FROM __SCHEMA__.workflow_tallies x WHERE x.workflow_id = w.id
) t
WHERE (%(state)s::text IS NULL OR w.state = %(state)s::text)
  AND (%(name)s::text IS NULL OR w.name = %(name)s::text)
  AND (%(before_id)s::bigint IS NULL OR w.id < %(before_id)s::bigint)
ORDER BY w.id DESC
LIMIT %(limit)s
