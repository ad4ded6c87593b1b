-- Back to 0021: the index of node names on jobs, as migration 0007 made it.
-- Cost: a build of the index over every row of jobs (a scan under a SHARE lock:
-- writes to jobs wait for it).
CREATE UNIQUE INDEX jobs_workflow_node_uidx ON __SCHEMA__.jobs (workflow_id, node)
    WHERE workflow_id IS NOT NULL;
