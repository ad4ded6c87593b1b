"""Run ``queue-claim-worker`` processes beside an application, started and stopped with it.

pqrun and dataloader ran their workers inside the web process, as asyncio
tasks beside the request handlers. The engine's worker cannot live there: it
runs one job at a time bracketed by a lease renewer and a wall-clock watchdog
that ends a runaway job by ending its process (exit 75), and a handler that
blocks (a CPU-bound step, a sync driver) would stall every request of an
event loop it shared. So an application that wants "the workers in the app"
gets real worker processes, started when it starts and stopped when it stops,
each the same ``queue-claim-worker`` that systemd or ``queue-ctl up`` runs
(docs/guides/worker.md, "Workers beside a web app")::

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with WorkerProcesses({"email": 2}, app="myapp.tasks"):
            yield

- Each child is ``queue-claim-worker --queue=Q --app APP [args]``, in its
  own session (a Ctrl-C in the terminal reaches the app, which stops them in
  order), its output on the application's. The DSN goes in the child's
  environment (``QUEUE_ENGINE_DSN``), never on a command line that ``ps``
  shows.
- A thread watches them and restarts an exited child by the rule of
  ``queue-ctl up`` (:class:`~queue_engine.foundation.restarts.RestartPolicy`):
  a watchdog exit (75) or a recycle (79) is restarted, a configuration error
  (2) or a crash loop is not, and says so in the log.
- :meth:`WorkerProcesses.stop` sends SIGTERM to every child (a worker stops
  claiming and lets its running job finish within
  ``QUEUE_ENGINE_SHUTDOWN_GRACE_S``, else gives it back), waits for that
  grace plus :data:`STOP_MARGIN_S`, then SIGKILLs what is left (the
  orchestrator recovers a killed worker's job).
- On Linux each child is also sent SIGTERM by the kernel when the thread that
  started it ends (``PR_SET_PDEATHSIG``): all children are started by the
  watching thread, which ends only after :meth:`~WorkerProcesses.stop`, or
  with the application's process, so a killed application leaves no orphan
  claiming jobs.
- ``QUEUE_ENGINE_WORKERS_BESIDE=off`` (or ``enabled=False``) starts none:
  the same application image serves as an API whose workers run elsewhere
  (pqrun's ``WORKER_ENABLED=false``, its "Pattern B").

The module imports the foundation only and starts no process when imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from queue_engine.foundation import settings
from queue_engine.foundation.errors import ConfigError, ValidationError
from queue_engine.foundation.exit_codes import ExitCode
from queue_engine.foundation.logs import log_event
from queue_engine.foundation.restarts import RestartPolicy, Verdict, describe_exit
from queue_engine.producer.validation import check_queue_name

log = logging.getLogger("queue_engine.worker_processes")

#: The console script the children run.
WORKER_SCRIPT = "queue-claim-worker"
#: Seconds after a child's shutdown grace before :meth:`WorkerProcesses.stop` kills it.
STOP_MARGIN_S = 10.0
#: Seconds between two looks at the children.
TICK_S = 0.2
#: ``prctl`` option: the signal a child gets when the thread that forked it ends (Linux).
_PR_SET_PDEATHSIG = 1
#: A restart time that never comes (a child that is not to be restarted).
_NEVER = float("inf")


def worker_command() -> list[str]:
    """The worker's console script beside this interpreter (a venv's), else on PATH, else ``-c``."""
    beside = Path(sys.executable).parent / WORKER_SCRIPT
    if beside.exists():
        return [str(beside)]
    found = shutil.which(WORKER_SCRIPT)
    if found is not None:
        return [found]
    return [sys.executable, "-c", "from queue_engine.cli.worker import main; main()"]


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when its parent thread ends; else None.

    ``prctl`` is looked up here, before any fork: the function run in the
    child between fork and exec only calls it (no import, no allocation that
    could wait on a lock another thread held at the fork).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before prctl: nobody will stop us
            os._exit(ExitCode.OK)

    return preexec


@dataclass
class _Child:
    queue: str
    index: int
    process: subprocess.Popen[bytes] | None = None
    restart_at: float | None = None
    given_up: bool = False
    codes: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"worker:{self.queue}#{self.index}"


class WorkerProcesses:
    """``queue-claim-worker`` processes per queue, started and stopped with the application.

    ``workers`` maps each queue to its number of processes (each runs one job
    at a time: the number is the queue's concurrency, pqrun's
    ``WORKER_CONCURRENCY``); ``app`` is the module registering the tasks
    (``--app``); ``dsn`` goes in the children's environment (unset: theirs,
    as every program reads it); ``args`` are more worker options
    (``["--prefetch", "10"]``); ``env`` is added to the children's
    environment. ``enabled=None`` reads ``QUEUE_ENGINE_WORKERS_BESIDE``.
    Use it as a context manager (sync or async), or call :meth:`start` and
    :meth:`stop`; both are safe to call twice, and :meth:`stop` before
    :meth:`start`.
    """

    def __init__(
        self,
        workers: Mapping[str, int],
        *,
        app: str,
        dsn: str | None = None,
        enabled: bool | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        stop_timeout_s: float | None = None,
        policy: RestartPolicy | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        if not workers:
            raise ValidationError("WorkerProcesses needs at least one queue: {'queue': count}")
        for queue, count in workers.items():
            check_queue_name(queue)
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 64:
                raise ValidationError(
                    f"WorkerProcesses: the number of workers of queue {queue!r} must be "
                    f"an integer between 0 and 64, got {count!r}"
                )
        if not isinstance(app, str) or not app:
            raise ValidationError("WorkerProcesses needs app='module' (the --app of the workers)")
        self._env = {**os.environ, **(env or {})}
        if dsn:
            self._env[settings.DSN.env] = dsn
        self.enabled = (
            settings.WORKERS_BESIDE.read(self._env) == "on" if enabled is None else bool(enabled)
        )
        grace = settings.SHUTDOWN_GRACE_S.read(self._env)
        self.stop_timeout_s = grace + STOP_MARGIN_S if stop_timeout_s is None else stop_timeout_s
        self._command = list(command or worker_command())
        self._options = ["--app", app, *args]
        self._policy = policy or RestartPolicy()
        self._children = [
            _Child(queue, index + 1) for queue, count in workers.items() for index in range(count)
        ]
        self._preexec = _die_with_parent()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    # -- the public lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start every worker process and the thread that watches them; return when all started."""
        with self._lock:
            if self._thread is not None or self._stopping.is_set():
                return
            if not self.enabled:
                log_event(
                    log,
                    logging.INFO,
                    "worker_processes.disabled",
                    setting=settings.WORKERS_BESIDE.env,
                )
                return
            self._thread = threading.Thread(
                target=self._watch, name="worker-processes", daemon=True
            )
            self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self.stop()
            raise ConfigError(
                f"cannot start {' '.join(self._command)}: {type(self._error).__name__}: {self._error}"
            ) from None

    def stop(self) -> dict[str, list[int]]:
        """SIGTERM every worker, wait for their graceful stop (SIGKILL after the timeout).

        Returns each child's exit codes, in order (restarts included).
        """
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join()
        return {child.name: list(child.codes) for child in self._children}

    @property
    def pids(self) -> list[int]:
        """The pids of the worker processes running now."""
        return [c.process.pid for c in self._children if c.process is not None]

    @property
    def given_up(self) -> list[str]:
        """The workers not restarted after a configuration error or a crash loop (see the log)."""
        return [c.name for c in self._children if c.given_up]

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- the watching thread ----------------------------------------------------------------

    def _watch(self) -> None:
        """Start the children, restart the exited ones by the policy, stop them all at the end."""
        try:
            for child in self._children:
                self._spawn(child)
        except OSError as exc:
            self._error = exc
        finally:
            self._ready.set()
        while self._error is None and not self._stopping.wait(TICK_S):
            for child in self._children:
                if child.process is not None and child.process.poll() is not None:
                    self._reap(child)
                elif child.process is None and time.monotonic() >= (child.restart_at or _NEVER):
                    self._respawn(child)
        self._stop_all()

    def _spawn(self, child: _Child) -> None:
        child.process = subprocess.Popen(
            [*self._command, f"--queue={child.queue}", *self._options],
            stdin=subprocess.DEVNULL,
            env=self._env,
            start_new_session=True,
            preexec_fn=self._preexec,  # safe: see _die_with_parent
        )
        child.restart_at = None
        log_event(
            log,
            logging.INFO,
            "worker_processes.started",
            worker=child.name,
            queue=child.queue,
            pid=child.process.pid,
        )

    def _respawn(self, child: _Child) -> None:
        try:
            self._spawn(child)
        except OSError as exc:
            child.given_up = True
            child.restart_at = None
            log_event(
                log, logging.ERROR, "worker_processes.given_up", worker=child.name, why=str(exc)
            )

    def _reap(self, child: _Child) -> None:
        assert child.process is not None
        code = child.process.wait()
        pid, child.process = child.process.pid, None
        child.codes.append(code)
        decision = self._policy.decide(child.name, code, stop_requested=False)
        if decision.verdict is Verdict.RESTART:
            child.restart_at = time.monotonic() + decision.delay_s
            level, event = logging.WARNING, "worker_processes.exited"
        else:
            child.given_up = decision.verdict is Verdict.GIVE_UP
            level = logging.ERROR if child.given_up else logging.WARNING
            event = "worker_processes.given_up" if child.given_up else "worker_processes.exited"
        log_event(log, level, event, worker=child.name, pid=pid, why=decision.reason)

    def _stop_all(self) -> None:
        """SIGTERM, wait up to the stop timeout, SIGKILL the rest; record every exit code."""
        running = [c for c in self._children if c.process is not None]
        for child in running:
            assert child.process is not None
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(signal.SIGTERM)
        if running:
            log_event(
                log,
                logging.INFO,
                "worker_processes.stopping",
                workers=len(running),
                timeout_s=self.stop_timeout_s,
            )
        deadline = time.monotonic() + self.stop_timeout_s
        for child in running:
            assert child.process is not None
            try:
                code = child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log_event(
                    log,
                    logging.WARNING,
                    "worker_processes.killed",
                    worker=child.name,
                    pid=child.process.pid,
                    timeout_s=self.stop_timeout_s,
                )
                child.process.kill()
                code = child.process.wait()
            child.codes.append(code)
            child.process = None
        if running:
            log_event(
                log,
                logging.INFO,
                "worker_processes.stopped",
                exits=", ".join(describe_exit(c.codes[-1]) for c in running),
            )
