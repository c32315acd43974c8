"""A clock the tests move by hand, so no test sleeps for a lease to lapse."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
        self.reads = 0
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.reads += 1
            return self.now

    def advance(self, seconds: float = 0, **kwargs: float) -> datetime:
        with self._lock:
            self.now += timedelta(seconds=seconds, **kwargs)
            return self.now
