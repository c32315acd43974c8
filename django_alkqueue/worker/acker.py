"""Group commit for acks: finished jobs wait a few milliseconds so that many are acked in one
statement and one commit. Each row is still fenced by its own claim token and lease."""

from __future__ import annotations

import threading
import time
from datetime import datetime

from .. import signals
from ..jobs import Job
from ..queues import JobHandle, ack_handles
from ..reports.worker_report import report_outcome, report_successes
from ..reports.worker_stats import WorkerStats
from .flow_state import FlowState
from .inflight import InFlight

#: The most acks one flush sends.
MAX_BATCH = 1000
#: How long an idle acker waits before it looks again; an ack arriving wakes it at once.
IDLE_WAIT = 1.0


class AckService:
    """The service that acks finished jobs. An ack that finds none pending starts an
    ACK_WINDOW (so does the end of a flush that leaves some); the next flush comes when it
    has passed, with every job finished meanwhile. A job of a queue whose cap (`concurrency`,
    `key_concurrency`) held its last claim back ends the window at once: it holds a slot
    until its ack commits, and a slot idle in the window is time no claim can use. Which
    queues' claims were held back it asks the worker's flow state (`flow`, shared with the
    claimer; one of its own, which knows of no claim, when none is given)."""

    name = "alk-acker"

    def __init__(
        self,
        using: str,
        inflight: InFlight,
        stats: WorkerStats,
        window: float,
        flow: FlowState | None = None,
    ) -> None:
        self.using = using
        self.inflight = inflight
        self.stats = stats
        self.window = window
        self.flow = flow if flow is not None else FlowState()
        self._pending: list[tuple[JobHandle, float]] = []
        #: The queues of the pending jobs (perhaps a few more, until none is pending): a
        #: flush asks each once whether its acks free a wanted slot, not each job.
        self._pending_queues: set[tuple[str, str]] = set()
        self._since = 0.0  # when the current window started (monotonic)
        self._lock = threading.Lock()
        #: Set when an ack arrives with none pending: the loop's wake-up. Not set for the
        #: acks that join a window already running, which would only wake it early.
        self.submitted = threading.Event()

    def submit_all(self, handles: list[JobHandle], started: float) -> bool:
        """The acks of the jobs of one handler call (one job, or a batch), under one lock.
        Returns whether they go out at once, without the window: a claim waits for their
        queue's slots."""
        if not handles:
            return False
        queue = (handles[0].queue.name, handles[0].queue.using)  # one handler call: one queue
        now_due = self.flow.slots_wanted(*queue)
        with self._lock:
            first = not self._pending
            self._pending.extend([(handle, started) for handle in handles])
            self._pending_queues.add(queue)
            if first:
                self._since = time.monotonic()
            if now_due:
                self._since = time.monotonic() - self.window
        if first or now_due:
            self.submitted.set()
        return now_due

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    @property
    def interval(self) -> float:
        """Until the window has passed; idle, until an ack wakes it (`submitted`)."""
        with self._lock:
            if not self._pending:
                return IDLE_WAIT
            return max(self._since + self.window - time.monotonic(), 0.0)

    def run_once(self, now: datetime) -> int:
        """Ack what is pending once the window has passed; returns how many were acked."""
        if self.interval > 0:
            return 0
        return self.flush()

    def flush(self) -> int:
        """Ack up to MAX_BATCH of the jobs submitted so far, window or not; returns how many
        were acked."""
        with self._lock:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        if not batch:
            return 0
        try:
            acked = ack_handles([h for h, _ in batch], self.using)
        except BaseException:
            with self._lock:  # keep them: the leases still run, the next flush retries
                self._pending[:0] = batch
                self._since = time.monotonic() - self.window
            raise
        succeeded = [(handle.job, started) for handle, started in batch if handle.claim in acked]
        if len(succeeded) < len(batch):
            for handle, started in batch:
                if handle.claim not in acked:
                    report_outcome(self.stats, handle.job, "lost", started)
        report_successes(self.stats, succeeded)
        signals.announce_each(signals.job_succeeded, Job, (job for job, _ in succeeded))
        self.inflight.remove_all([handle for handle, _ in batch])
        with self._lock:
            if not self._pending:
                self._pending_queues.clear()
            else:  # they came during this flush: the next window starts now
                self._since = time.monotonic()
                if any(self.flow.slots_wanted(*queue) for queue in self._pending_queues):
                    self._since -= self.window
        return len(acked)
