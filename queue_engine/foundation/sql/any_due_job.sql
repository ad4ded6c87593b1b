-- An idle worker's safety poll (queue_engine/worker/loop.py): is any job of the
-- queue due? One probe of the claimable index, about a tenth of the server CPU
-- of an empty finish-and-claim (which also evaluates the gate, the rate limit
-- and the outcome CTEs), so a big idle fleet costs the database little; the
-- claim runs only when this says yes (or a NOTIFY woke the worker).
--
-- It also counts the queue's idle workers (state 'idle', heartbeated within
-- %(fresh_s)s, this one included): each idle worker then polls every POLL_S x
-- idle / QUEUE_POLL_RATE (queue_engine/worker/idle.py), so the queue is probed
-- about QUEUE_POLL_RATE times a second whatever the size of the fleet, and a
-- delayed job coming due is still found within about a second. The
-- workers table has a row per process (hundreds), read here a few times a
-- second per queue, not per worker.
SELECT EXISTS (
           SELECT 1 FROM __SCHEMA__.jobs j
           WHERE j.queue = %(queue)s AND j.status = 'queued' AND j.available_at <= now()
       ) AS due,
       (SELECT count(*) FROM __SCHEMA__.workers w
        WHERE w.queue = %(queue)s
          AND w.role = 'worker'
          AND w.state = 'idle'
          AND w.stopped_at IS NULL
          AND w.heartbeat_at > now() - make_interval(secs => %(fresh_s)s::float8))::int
           AS idle_workers
