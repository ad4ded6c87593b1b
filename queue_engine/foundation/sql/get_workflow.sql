-- One workflow with its node counts: the sum of at most 16 tally rows, never a
-- scan of its jobs.
SELECT w.id, w.name, w.state, w.node_count, w.idempotency_key, w.producer, w.schedule,
       w.cancel_requested, w.created_at, w.finished_at,
       t.unfinished, t.succeeded, t.failed, t.canceled, t.lost, t.skipped
FROM __SCHEMA__.workflows w
CROSS JOIN LATERAL __SCHEMA__.workflow_counts(w.id) t
WHERE w.id = %(id)s
