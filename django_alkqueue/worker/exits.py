"""The worker's exit statuses that tell a supervisor (systemd, supervisord, --processes) what
happened, and the refusal to start that carries one."""

from __future__ import annotations

from django.core.management.base import CommandError

#: EX_SOFTWARE from sysexits.h: one of the worker's loops died of an unexpected error. The
#: worker released its jobs and stopped; a restart gives it a fresh process.
EXIT_SOFTWARE = 70
#: EX_TEMPFAIL from sysexits.h: more than --max-stuck handler threads were stuck past their
#: time limit. The worker finished its other jobs, released what it held and stopped; a
#: restart gives it a fresh process, without the stuck threads (docs/running-jobs.md).
EXIT_STUCK = 75
#: EX_CONFIG from sysexits.h: the configuration is wrong; restarting will not help.
EXIT_CONFIG = 78
#: A second SIGTERM or SIGINT: the worker left at once, its jobs not released.
EXIT_AT_ONCE = 1
#: argparse's refusal of a command-line value.
EXIT_USAGE = 2
#: The statuses a worker process exits with of its own accord (docs/worker.md#exit-statuses),
#: which the --processes supervisor never takes for a handler's crash. 3 and 4 (the
#: database or its migrations at start-up) come before any job starts.
WORKER_EXITS = frozenset({0, EXIT_AT_ONCE, EXIT_USAGE, EXIT_SOFTWARE, EXIT_STUCK, EXIT_CONFIG})


class StartupRefused(CommandError):
    """The worker cannot serve what it was asked to (no consumer, a handler conflict, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=EXIT_CONFIG)
