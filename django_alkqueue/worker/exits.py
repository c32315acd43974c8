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


class StartupRefused(CommandError):
    """The worker cannot serve what it was asked to (no consumer, a handler conflict, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=EXIT_CONFIG)
