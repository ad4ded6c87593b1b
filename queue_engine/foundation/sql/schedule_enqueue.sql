-- Enqueue a schedule's job (for a claimed slot, or a manual run when slot is NULL),
-- link it to the slot's run row and remember it as the schedule's latest job.
WITH job AS (
    INSERT INTO __SCHEMA__.jobs (queue, task, args, priority, max_attempts, timeout_s, producer)
    VALUES (%(queue)s, %(task)s, %(args)s::jsonb, %(priority)s, %(max_attempts)s,
            %(timeout_s)s, %(producer)s)
    RETURNING id
),
run AS (
    UPDATE __SCHEMA__.schedule_runs r SET job_id = job.id
    FROM job
    WHERE r.schedule = %(name)s AND r.slot = %(slot)s::timestamptz
    RETURNING r.slot
),
sched AS (
    UPDATE __SCHEMA__.schedules s SET
        last_job_id = job.id,
        last_slot = coalesce(greatest(s.last_slot, %(slot)s::timestamptz), s.last_slot)
    FROM job
    WHERE s.name = %(name)s
    RETURNING s.name
)
SELECT job.id, (SELECT count(*) FROM run) AS runs, (SELECT count(*) FROM sched) AS schedules
FROM job
