"""What a handler may raise to choose its job's outcome, besides returning (ack)."""

from __future__ import annotations

from datetime import timedelta

from . import validation


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


class Snooze(Exception):
    """Put the job back for later: pending again after `delay` (seconds or timedelta), the
    attempt refunded and its last error kept, unlike `Retry`. A bad delay raises InvalidOption
    where the Snooze is built."""

    def __init__(self, delay: float | timedelta) -> None:
        self.delay = validation.seconds(delay, "delay")
        super().__init__(f"snoozed for {self.delay:g} s")


class Cancelled(Exception):
    """The job was cancelled while it ran (`Queue.cancel`, the admin's Cancel) or passed its
    time limit: raised by `job.check_cancelled()`. Let it propagate: the attempt ends with
    no retry and no dead letter (docs/running-jobs.md)."""

    def __init__(self, reason: str = "cancelled") -> None:
        super().__init__(reason)
        self.reason = reason
