"""What a handler may raise to choose its job's outcome, besides returning (ack)."""

from __future__ import annotations

from datetime import timedelta


class Retry(Exception):
    """Retry the job: after `delay` (seconds or timedelta), or the consumer's policy curve."""

    def __init__(self, delay: float | timedelta | None = None, reason: str | None = None) -> None:
        super().__init__(reason or "retry requested")
        self.delay = delay
        self.reason = reason


class Fail(Exception):
    """Dead-letter the job now, with `reason` as its last error."""

    def __init__(self, reason: str = "failed") -> None:
        super().__init__(reason)
        self.reason = reason
