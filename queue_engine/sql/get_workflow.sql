-- One workflow with its node counts: the sum of at most 16 tally rows, never a
-- scan of its jobs.
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
WHERE w.id = %(id)s
