"""What this worker did, per queue and outcome; read by the reports and the presence row."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable

from .. import timings
from ..models import DURATION_BUCKETS

#: "cancelled": the handler let Cancelled propagate (docs/running-jobs.md).
OUTCOMES = ("succeeded", "retried", "snoozed", "dead", "lost", "cancelled")
#: The histogram's upper bounds; a duration past the last one counts in the extra bucket.
BOUNDS = tuple(bound for bound, _ in DURATION_BUCKETS)


class Durations:
    """One queue's handler durations: runs per bucket (not cumulative) and their sum."""

    __slots__ = ("runs", "seconds")

    def __init__(self) -> None:
        self.runs = [0] * (len(BOUNDS) + 1)
        self.seconds = 0.0


class WorkerStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_queue: dict[str, Counter[str]] = {}
        #: Per queue, the wait histogram of its jobs so far (timings.py).
        self.waits: dict[str, list[int]] = {}
        #: Per queue, its handler calls' durations: the run time (record_duration).
        self.durations: dict[str, Durations] = {}
        #: Over every queue: handler calls finished and their seconds (handler_totals).
        self._calls = 0
        self._call_seconds = 0.0
        self.started = time.monotonic()

    def record(
        self,
        queue: str,
        outcome: str,
        count: int = 1,
        times: Iterable[tuple[float, float, int]] = (),
    ) -> None:
        """Count `count` jobs of `queue` with `outcome`, and their waits into the queue's
        wait histogram, under one lock: each (wait, run, n) counts n jobs (sampled batches).
        The run is not counted here: the run time is the handler duration that Executor.call
        records (record_duration), the one histogram of the chart and /metrics/."""
        bins = [(timings.bin_of(wait), n) for wait, _run, n in times]
        with self._lock:
            counts = self.by_queue.get(queue)
            if counts is None:  # not setdefault: it would build a Counter on every call
                counts = self.by_queue[queue] = Counter()
            counts[outcome] += count
            if bins:
                self._add_bins(queue, bins)

    def _add_bins(self, queue: str, bins: list[tuple[int, int]]) -> None:
        wait = self.waits.get(queue)
        if wait is None:
            wait = self.waits[queue] = timings.empty()
        for wait_bin, n in bins:
            wait[wait_bin] += n

    def wait_snapshot(self) -> dict[str, list[int]]:
        """Per queue: its jobs so far per wait bin (timings.BOUNDS)."""
        with self._lock:
            return {q: list(wait) for q, wait in self.waits.items()}

    def record_duration(self, queue: str, seconds: float) -> None:
        """One handler call of `queue` took `seconds`."""
        with self._lock:
            durations = self.durations.get(queue)
            if durations is None:
                durations = self.durations[queue] = Durations()
            durations.runs[bisect_left(BOUNDS, seconds)] += 1
            durations.seconds += seconds
            self._calls += 1
            self._call_seconds += seconds

    def handler_totals(self) -> tuple[int, float]:
        """Handler calls finished so far, over every queue, and the seconds they took: what
        the claim-ahead estimate reads (claim_ahead.py)."""
        with self._lock:
            return self._calls, self._call_seconds

    def duration_snapshot(self) -> dict[str, tuple[list[int], float]]:
        """Per queue: runs per bucket so far (the last past every bound) and their seconds."""
        with self._lock:
            return {q: (list(d.runs), d.seconds) for q, d in self.durations.items()}

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
