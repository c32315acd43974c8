"""Why a worker refuses to start, and the exit code that tells a supervisor not to retry."""

from __future__ import annotations

from django.core.management.base import CommandError

#: EX_CONFIG from sysexits.h: the configuration is wrong; restarting will not help.
EXIT_CONFIG = 78


class StartupRefused(CommandError):
    """The worker cannot serve what it was asked to (no consumer, a handler conflict, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, returncode=EXIT_CONFIG)
