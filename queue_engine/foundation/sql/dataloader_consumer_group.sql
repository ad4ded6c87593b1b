-- Record a dataloader trigger's consumer_group on the job it created, as an
-- event of kind `consumer_group` whose message is the group, in the trigger's
-- transaction. An event rather than a column: the group was informational in
-- dataloader (no claim read it), so it costs the enqueue statements nothing,
-- shows in every timeline (queue-ctl show, the dashboard, /events), and is
-- pruned with its job.
INSERT INTO __SCHEMA__.job_events (job_id, kind, to_status, attempt, message)
VALUES (%(job_id)s, 'consumer_group', %(status)s, 0, %(consumer_group)s)
