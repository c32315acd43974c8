"""Claim and dispatch: claim up to the free capacity in one query per queue, hand the jobs to
the handler threads, then wait for a wake-up (a NOTIFY, a freed slot) or the poll interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ..models import Consumer
from ..queues import MAX_CLAIM, JobHandle, Queue
from .inflight import InFlight


class PausedQueues:
    """Which served queues are paused, re-read at most once per poll interval."""

    def __init__(self, using: str, queues: list[str], every: float) -> None:
        self.using = using
        self.queues = queues
        self.every = every
        self._paused: set[str] = set()
        self._read_at = float("-inf")

    def current(self) -> set[str]:
        if time.monotonic() - self._read_at >= self.every:
            self._paused = set(
                Consumer.objects.using(self.using)
                .filter(queue__in=self.queues, paused=True)
                .values_list("queue", flat=True)
            )
            self._read_at = time.monotonic()
        return self._paused


class Claimer:
    def __init__(
        self,
        queues: list[Queue],
        worker_id: str,
        inflight: InFlight,
        dispatch: Callable[[JobHandle], None],
        capacity: int,
        batch: int | None,
        paused: PausedQueues,
        max_jobs: int | None,
    ) -> None:
        self.queues = queues
        self.worker_id = worker_id
        self.inflight = inflight
        self.dispatch = dispatch
        self.capacity = capacity
        self.batch = batch
        self.paused = paused
        self.max_jobs = max_jobs
        self.refill = max(1, min(batch or capacity, capacity) // 2)
        self.claimed_total = 0
        #: Whether the last run_once filled a claim to the brim: more may be due right now.
        self.came_back_full = False
        self._next = 0

    def worth_claiming(self) -> bool:
        """Claim when half the capacity (or the batch) is free, or when nothing runs: topping
        up one slot at a time would spend a transaction per job."""
        free = self.room()
        return free > 0 and (free >= self.refill or self.inflight.running() == 0)

    def room(self) -> int:
        """How many more jobs this worker may take now."""
        free = self.capacity - self.inflight.running()
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed_total)
        return max(free, 0)

    def run_once(self) -> int:
        """Claim and dispatch once across the served, non-paused queues; returns jobs claimed."""
        self.came_back_full = False
        if not self.worth_claiming():
            return 0
        paused = self.paused.current()
        active = [q for q in self.queues if q.name not in paused]
        claimed = 0
        # Start from a different queue each tick so that one busy queue cannot starve the rest.
        for offset in range(len(active)):
            queue = active[(self._next + offset) % len(active)]
            want = min(self.room(), MAX_CLAIM)
            if self.batch is not None:
                want = min(want, self.batch)
            if want <= 0:
                break
            handles = queue.claim(self.worker_id, want)
            self.came_back_full = self.came_back_full or len(handles) == want
            for handle in handles:
                self.inflight.add(handle)
                self.claimed_total += 1
                claimed += 1
                self.dispatch(handle)
        self._next += 1
        return claimed

    def exhausted(self) -> bool:
        return self.max_jobs is not None and self.claimed_total >= self.max_jobs

    def wait(self, wake: threading.Event, poll_interval: float) -> None:
        """Sleep until woken or the poll interval passes."""
        wake.wait(poll_interval)
        wake.clear()
