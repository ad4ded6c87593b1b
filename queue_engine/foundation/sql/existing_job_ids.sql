-- Which of the given job ids (%(ids)s, a bigint[]) name a job, kept or
-- archived: what a bulk action by ids counts as matched (a dry run says how
-- many jobs it would act on, not how many ids it was given). One index probe
-- per id, the ids of one request at most QUEUE_ENGINE_WEB_BULK_MAX.
SELECT j.id
FROM __SCHEMA__.jobs_all j
WHERE j.id = ANY (%(ids)s::bigint[])
