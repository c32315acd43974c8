"""What this worker did, per queue and outcome; read by the reports and the presence row."""

from __future__ import annotations

import threading
import time
from collections import Counter

OUTCOMES = ("succeeded", "retried", "snoozed", "dead", "lost")


class WorkerStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_queue: dict[str, Counter[str]] = {}
        self.started = time.monotonic()

    def record(self, queue: str, outcome: str, count: int = 1) -> None:
        with self._lock:
            counts = self.by_queue.get(queue)
            if counts is None:  # not setdefault: it would build a Counter on every call
                counts = self.by_queue[queue] = Counter()
            counts[outcome] += count

    def totals(self) -> Counter[str]:
        with self._lock:
            total: Counter[str] = Counter()
            for counts in self.by_queue.values():
                total.update(counts)
            return total

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {q: {o: c[o] for o in OUTCOMES} for q, c in sorted(self.by_queue.items())}

    def finished(self) -> int:
        """Jobs this worker is done with, whatever their outcome."""
        return sum(self.totals().values())

    def failed(self) -> int:
        totals = self.totals()
        return totals["retried"] + totals["dead"]
