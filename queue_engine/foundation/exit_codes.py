"""The exit codes of every queue-engine program: one contract, in one place.

Scripts and systemd units act on these numbers (a worker unit restarts after
75, 76, 77 and 79; a script retries on 69), so they are part of the public
interface. ``docs/reference/exit-codes.md`` documents them, and a test holds
that page and this enum together: a code added here without a row there (or
the reverse) fails the suite.

Codes above 2 follow ``sysexits.h`` where one fits (69 ``EX_UNAVAILABLE``,
70 ``EX_SOFTWARE``, 75 is ``EX_TEMPFAIL``: a job's budget ran out, try again)
and 130 is the shell's "killed by SIGINT" (128 + 2).

This module imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Why a queue-engine process ended; the value is its exit status."""

    #: Success, or a clean stop (SIGTERM/SIGINT; a worker's SIGTERM grace that
    #: ran out also ends in a clean stop, its job given back).
    OK = 0
    #: The request was valid but does not apply (job not found, wrong status);
    #: also a ``queue-claim-worker`` ended by its hard deadline (faulthandler's
    #: ``_exit(1)``, not ours to choose: see ``queue_engine.worker.deadline``).
    FAILURE = 1
    #: Usage, configuration or validation error: fix the command or the settings.
    USAGE = 2
    #: The schema is missing or out of date, or a migration failed.
    MIGRATION = 3
    #: The database is unreachable (``EX_UNAVAILABLE``).
    UNAVAILABLE = 69
    #: An internal error, a bug (``EX_SOFTWARE``).
    SOFTWARE = 70
    #: ``queue-claim-worker``: a job ran past its wall-clock budget.
    WATCHDOG = 75
    #: ``queue-claim-worker``: a job that reports progress stopped reporting it.
    STALL = 76
    #: ``queue-claim-worker``: a job ignored its cancel, or was lost and did not stop.
    HARD_STOP = 77
    #: ``queue-claim-worker``: a recycling limit (``--max-jobs``, ``--max-rss``,
    #: ``--max-age``) was reached between jobs; a clean stop the supervisor answers
    #: with a fresh process (its unit restarts on it).
    RECYCLE = 79
    #: Interrupted: Ctrl-C, or a second SIGTERM/SIGINT that ends a daemon at once.
    INTERRUPTED = 130
