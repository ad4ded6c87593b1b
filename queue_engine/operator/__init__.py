"""The operator's tools: what a person running the fleet reads and changes.

The figures (:mod:`.stats`: per-queue numbers, the workers table, a job's
timeline), the controls (:mod:`.controls`: pause, resume, scale, rate, park,
unpark, stop), the least-privilege roles (:mod:`.roles`), and how a job or a
workflow reads to a person (:mod:`.job_display`, :mod:`.workflow_layout`), and
the import of a replaced system's unfinished work (:mod:`.importing`).
``queue-ctl`` and ``queue-web`` are two faces of these same functions, so the
command line and the dashboard cannot disagree; the orchestrator's metrics
read the same figures.

A module here imports the foundation, the producer API (an operator's tool
reads what producers made: the job record, a workflow's nodes) and its own
wing; nothing in the producer API imports it (``tests/unit/test_layers.py``),
so an application that only enqueues never loads it. Nothing is imported by
this file.
"""
