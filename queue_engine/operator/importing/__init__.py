"""``queue-ctl import``: move the unfinished work of a system this engine replaces.

dataloader (``dl_jobs``), pqrun (``jobs``) and queue_workflows
(``ingest_jobs``, ``workflow_runs`` with ``workflow_node_jobs``): their
queued, delayed and running jobs and their unfinished workflows, read with
plain SELECTs and written here in batches with an id map (``imported_ids``,
migration 0029). :mod:`.convert` and :mod:`.workflows` hold the rules (pure),
:mod:`.run` the reading and writing. Nothing is imported here.
"""
