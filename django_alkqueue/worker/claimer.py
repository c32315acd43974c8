"""Claim and dispatch: claim up to the free capacity (and, without --batch, the jobs it will
start within a short horizon: claim_ahead.py) in one query per queue, hand each claim's
jobs to the handler threads (`dispatch`, see worker/units.py), then wait for a wake-up (a
NOTIFY, a freed slot) or the poll interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from ..models import Consumer
from ..queues import MAX_CLAIM, JobHandle, Queue
from .acker import MAX_BATCH
from .flow_state import FlowState
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
    woke us, has committed by then (sql/postgresql/wake_pacing.py). A later NOTIFY moves it on.
    A claim held back by its queue's rate brings a full look when the rate frees room
    (FlowState.room_at), not a poll interval later. The claims go through the worker's flow
    state (`flow`; one of the claimer's own when none is given), which holds the limits.

    Without a `batch`, `ahead()` (a ClaimAhead's estimate, read once per look) adds the jobs
    the worker will start shortly to its capacity: the refill mark is half of that sum.
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
        ahead: Callable[[], int] | None = None,
        flow: FlowState | None = None,
    ) -> None:
        self.queues = queues
        self.worker_id = worker_id
        self.inflight = inflight
        self.dispatch = dispatch
        self.capacity = capacity
        self.batch = batch
        self.paused = paused
        self.max_jobs = max_jobs
        #: None with --batch: the batch pins the claim size.
        self.ahead = ahead if batch is None else None
        self._ahead = 0  # this look's estimate
        self.poll_interval = poll_interval
        self.follow_up = follow_up
        self.monotonic = monotonic
        self.flow = flow if flow is not None else FlowState(monotonic=monotonic)
        #: Set by the listener on a NOTIFY for a served queue: the next look is a full one.
        self.notified = threading.Event()
        self._full_look_at = float("-inf")  # the first look is a full one
        self._follow_up_at = float("inf")
        self.claimed_total = 0
        #: Whether the last run_once filled a claim to the brim: more may be due right now.
        self.came_back_full = False
        self._next = 0

    @property
    def refill(self) -> int:
        """The free slots a top-up waits for: half the in-flight limit (or of the batch)."""
        limit = self.capacity + self._ahead
        return max(1, min(self.batch or limit, limit) // 2)

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
        if (
            not notified
            and now < self._follow_up_at
            and now < self._next_poll_at()
            and now < self._room_at()
        ):
            return False
        # Consumed even when no slot is free: a NOTIFY kept for later would turn the next
        # finished job into a claim of one, the very top-up the refill mark avoids.
        self.notified.clear()
        self._full_look_at = now
        self.flow.looked_until(now)  # a rate's room, once looked for, is not looked for again
        if notified and self.follow_up is not None:
            self._follow_up_at = now + self.follow_up
        elif now >= self._follow_up_at:
            self._follow_up_at = float("inf")
        return True

    def _next_poll_at(self) -> float:
        return self._full_look_at + self.poll_interval

    def _room_at(self) -> float:
        """When a served queue's rate, which held its last claim back, frees room."""
        return self.flow.room_at()

    def room(self) -> int:
        """How many more jobs this worker may take now. Jobs awaiting their ack take no
        capacity, up to a full ack batch (or the capacity, when larger); beyond it they take
        capacity like running ones: an acker held up (by a slow job_succeeded receiver, which
        runs on its thread) would otherwise let the held jobs, each under a lease the
        heartbeat service extends, pile up without bound (docs/worker.md, "Capacity and
        prefetch")."""
        behind = self.inflight.awaiting_ack() - max(MAX_BATCH, self.capacity)
        free = self.capacity + self._ahead - self.inflight.running() - max(behind, 0)
        if self.max_jobs is not None:
            free = min(free, self.max_jobs - self.claimed_total)
        return max(free, 0)

    def run_once(self) -> int:
        """Claim and dispatch once across the served, non-paused queues; returns jobs claimed."""
        self.came_back_full = False
        if self.ahead is not None:
            self._ahead = self.ahead()
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
            handles = self.flow.claim(queue, self.worker_id, want)
            self.came_back_full = self.came_back_full or len(handles) == want
            if handles:
                self.inflight.add_all(handles)
                self.claimed_total += len(handles)
                claimed += len(handles)
                self.dispatch(handles)
        self._next += 1
        return claimed

    def due_left(self) -> bool:
        """Whether a served, unpaused queue that no limit held back still has a due job: a
        claim skips rows another transaction holds locked for a moment (SKIP LOCKED; on
        InnoDB even a read that only scans a row locks it), so its coming back empty does
        not prove the queue drained."""
        paused = self.paused.current()
        return any(
            queue.has_due()
            for queue in self.queues
            if queue.name not in paused and not self.flow.limited(queue.name, queue.using)
        )

    def exhausted(self) -> bool:
        return self.max_jobs is not None and self.claimed_total >= self.max_jobs

    def until_next_look(self) -> float:
        """Seconds until the next full look is due (a follow-up or a poll)."""
        due_at = min(self._next_poll_at(), self._follow_up_at, self._room_at())
        return max(due_at - self.monotonic(), 0.0)

    def wait(self, wake: threading.Event) -> None:
        """Sleep until woken (a NOTIFY, a finished job, a signal) or the next full look is
        due (a follow-up or a poll): never longer, so a free slot is not left idle past it."""
        wake.wait(self.until_next_look())
        wake.clear()


class ClaimService:
    """The worker's main service: claim and dispatch, then wait for a wake-up (a NOTIFY, a
    handler finishing, a signal) or the next full look. It sets `done` when a `--burst`
    worker finds nothing due with nothing in flight, or a `--max-jobs` worker has claimed
    and finished its jobs."""

    name = "alk-claim"

    def __init__(
        self,
        claimer: Claimer,
        acks_pending: Callable[[], int],
        burst: bool,
        done: threading.Event,
    ) -> None:
        self.claimer = claimer
        self.acks_pending = acks_pending
        self.burst = burst
        self.done = done
        self._again = False

    @property
    def interval(self) -> float:
        return 0.0 if self._again else self.claimer.until_next_look()

    def run_once(self, now: datetime) -> int:
        """Claim once; returns the jobs claimed."""
        # Idle is judged before the claim: a handler may retry a job (making it due) and
        # leave between the claim and a later look, which would end a burst too early.
        was_idle = self._idle()
        claimed = self.claimer.run_once()
        if (self.claimer.exhausted() and self._idle()) or (
            self.burst and claimed == 0 and was_idle and not self.claimer.due_left()
        ):
            self.done.set()
        # A claim that came back short emptied the queue as of its snapshot: anything
        # enqueued since sends a NOTIFY (a wake-up), or follows one closely enough for that
        # NOTIFY's follow-up look to find it. A full one may leave more due right now.
        self._again = self.claimer.came_back_full and self.claimer.worth_claiming()
        return claimed

    def _idle(self) -> bool:
        return self.claimer.inflight.count() == 0 and self.acks_pending() == 0
