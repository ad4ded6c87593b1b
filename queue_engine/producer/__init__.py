"""The producer API: what an application's code calls, to give work and to do it.

To give work: the clients (:mod:`.async_client`, and :mod:`.client` generated
from it, on :mod:`.client_pool`) enqueue, inspect, cancel and retry jobs and
workflows (:mod:`.workflows`); :mod:`.operations` is what each call sends and
how it reads the answer, :mod:`.validation` checks a request before anything
is written, :mod:`.kept_defaults` keeps the task defaults a plain enqueue met.
To do it: a handler is declared with ``@task`` (:mod:`.tasks`), sees its job
through :mod:`.context`, buffers follow-ups (:mod:`.followups`) and steers
its retries (:mod:`.retry`); a worker publishes its tasks' defaults
(:mod:`.task_publications`); ``@periodic`` declares a schedule
(:mod:`.schedules`, :mod:`.cron`). :mod:`.jobs` is the job record and its
states, as every reader sees them.

The package root re-exports the public names; a module here imports only the
producer API and the foundation (``tests/unit/test_layers.py``), so an
application that enqueues loads no daemon and no operator tool. Nothing is
imported by this file.
"""
