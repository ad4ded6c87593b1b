-- Prototype mover (bench/heap_layout.py --archive-after): one batch of jobs that
-- finished more than %(after_s)s seconds ago leaves jobs for jobs_archive, oldest
-- first, in one statement; a row someone holds is left for the next batch.
WITH picked AS (
    SELECT j.id
    FROM queue_engine.jobs j
    WHERE j.finished_at < now() - make_interval(secs => %(after_s)s)
    ORDER BY j.finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM queue_engine.jobs j USING picked p WHERE j.id = p.id RETURNING j.*
)
INSERT INTO queue_engine.jobs_archive SELECT * FROM moved
