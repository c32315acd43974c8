"""The clock is a parameter: code asks a `Clock` for the time, tests pass one they can move."""

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    """The real time, timezone-aware (UTC)."""
    return timezone.now()
