-- queue-ctl import --from dataloader: how many jobs dl_jobs holds in each
-- status, those with a cancel requested apart (they are not moved). The first
-- statement the importer sends: a source without `dl_jobs` fails here.
SELECT 'job' AS kind, CASE WHEN j.cancel_requested AND j.status IN ('queued', 'running')
            THEN j.status || ' (cancel requested)' ELSE j.status END AS status,
       count(*) AS n
FROM dl_jobs j
GROUP BY 2
ORDER BY 2
