"""Claim and dispatch: claim up to the free capacity in one query per queue, hand each claim's
jobs to the handler threads (`dispatch`, see worker/units.py), then wait for a wake-up (a
NOTIFY, a freed slot) or the poll interval."""

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
    """Claims for the free handler threads.

    Two kinds of look: a *top-up*, after a job finished, claims only once the refill mark
    (half the capacity, or of the batch) is free, or nothing runs: topping up one slot per
    finished job would spend a transaction per job, and batching is what the drain
    throughput rests on. A *full look*, on a NOTIFY or once a poll interval has passed
    since the last full look, claims whatever capacity is free, so a free thread waits at
    most one poll interval (or until a NOTIFY) for a due job, however long the others run.
    A NOTIFY also brings a *follow-up* full look `follow_up` seconds later: an enqueue that
    its sender's connection left unannounced, within the NOTIFY_WINDOW after the one that
    woke us, has committed by then (sql/wake_pacing.py). A later NOTIFY moves it on.
    """

    def __init__(
        self,
        queues: list[Queue],
        worker_id: str,
        inflight: InFlight,
        dispatch: Callable[[list[JobHandle]], None],
        capacity: int,
        batch: int | None,
        paused: PausedQueues,
        max_jobs: int | None,
        *,
        poll_interval: float = 1.0,
        follow_up: float | None = None,
        monotonic: Callable[[], float] = time.monotonic,
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
        self.poll_interval = poll_interval
        self.follow_up = follow_up
        self.monotonic = monotonic
        #: Set by the listener on a NOTIFY for a served queue: the next look is a full one.
        self.notified = threading.Event()
        self._full_look_at = float("-inf")  # the first look is a full one
        self._follow_up_at = float("inf")
        self.claimed_total = 0
        #: Whether the last run_once filled a claim to the brim: more may be due right now.
        self.came_back_full = False
        self._next = 0

    def worth_claiming(self, full_look: bool = False) -> bool:
        """Any free slot is worth a full look; a top-up waits for the refill mark, unless
        nothing runs."""
        free = self.room()
        if free == 0:
            return False
        return full_look or free >= self.refill or self.inflight.running() == 0

    def full_look_due(self) -> bool:
        """Whether this look is a full one (a NOTIFY came, its follow-up is due, or a poll
        interval passed since the last full look); if so, it counts as that full look."""
        now = self.monotonic()
        notified = self.notified.is_set()
        if not notified and now < self._follow_up_at and now < self._next_poll_at():
            return False
        # Consumed even when no slot is free: a NOTIFY kept for later would turn the next
        # finished job into a claim of one, the very top-up the refill mark avoids.
        self.notified.clear()
        self._full_look_at = now
        if notified and self.follow_up is not None:
            self._follow_up_at = now + self.follow_up
        elif now >= self._follow_up_at:
            self._follow_up_at = float("inf")
        return True

    def _next_poll_at(self) -> float:
        return self._full_look_at + self.poll_interval

    def room(self) -> int:
        """How many more jobs this worker may take now."""
        free = self.capacity - self.inflight.running()
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed_total)
        return max(free, 0)

    def run_once(self) -> int:
        """Claim and dispatch once across the served, non-paused queues; returns jobs claimed."""
        self.came_back_full = False
        if not self.worth_claiming(self.full_look_due()):
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
            if handles:
                self.inflight.add_all(handles)
                self.claimed_total += len(handles)
                claimed += len(handles)
                self.dispatch(handles)
        self._next += 1
        return claimed

    def exhausted(self) -> bool:
        return self.max_jobs is not None and self.claimed_total >= self.max_jobs

    def wait(self, wake: threading.Event) -> None:
        """Sleep until woken (a NOTIFY, a finished job, a signal) or the next full look is
        due (a follow-up or a poll): never longer, so a free slot is not left idle past it."""
        due_at = min(self._next_poll_at(), self._follow_up_at)
        wake.wait(max(due_at - self.monotonic(), 0.0))
        wake.clear()
