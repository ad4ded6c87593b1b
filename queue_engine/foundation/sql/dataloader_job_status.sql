-- One job as dataloader's status and cancel routes answer it (queue-web
-- --compat dataloader). started_at is the job's FIRST start, as dataloader's
-- claim kept it (COALESCE(started_at, now())): jobs.started_at is the latest
-- attempt's, so the first is the time of the job's first `claimed` event
-- (every claim writes one in the claim's statement, with the claim's now()),
-- found through job_events_job_id_idx; the row's own started_at when the
-- events are gone. Read only by this route: nothing is added to the claim.
SELECT j.id, j.status, j.attempt, j.finished_at, j.heartbeat_at, j.error, j.progress,
       coalesce(
           (SELECT e.at FROM __SCHEMA__.job_events e
            WHERE e.job_id = j.id AND e.kind = 'claimed'
            ORDER BY e.id
            LIMIT 1),
           j.started_at
       ) AS started_at
FROM __SCHEMA__.jobs_all j
WHERE j.id = %(id)s
