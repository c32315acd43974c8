"""Group commit for acks: finished jobs wait a few milliseconds so that many are acked in one
statement and one commit. Each row is still fenced by its own claim token and lease."""

from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, InterfaceError, connections

from .. import signals
from ..jobs import Job
from ..queues import JobHandle, ack_handles
from .connections import ThreadConnections
from .inflight import InFlight
from .report import report_outcome, report_successes
from .stats import WorkerStats

logger = logging.getLogger("django_alkqueue")

MAX_BATCH = 1000


class Acker:
    def __init__(self, using: str, inflight: InFlight, stats: WorkerStats, window: float) -> None:
        self.using = using
        self.inflight = inflight
        self.stats = stats
        self.window = window
        self._pending: list[tuple[JobHandle, float]] = []
        self._cond = threading.Condition()
        self._connections = ThreadConnections()

    def submit(self, handle: JobHandle, started: float) -> None:
        with self._cond:
            self._pending.append((handle, started))
            self._cond.notify()

    def submit_all(self, handles: list[JobHandle], started: float) -> None:
        """submit() for the jobs of one batch handler call, under one lock."""
        if not handles:
            return
        with self._cond:
            self._pending.extend((handle, started) for handle in handles)
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def run_once(self) -> int:
        """Ack everything submitted so far; returns how many were acked."""
        with self._cond:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
        if not batch:
            return 0
        try:
            acked = ack_handles([h for h, _ in batch], self.using)
        except BaseException:
            with self._cond:  # keep them: the leases still run, the next flush retries
                self._pending[:0] = batch
            raise
        succeeded: list[tuple[Job, float]] = []
        for handle, started in batch:
            if handle.claim in acked:
                succeeded.append((handle.job, started))
            else:
                report_outcome(self.stats, handle.job, "lost", started)
        report_successes(self.stats, succeeded)
        for job, _ in succeeded:
            signals.announce(signals.job_succeeded, Job, job=job)
        self.inflight.remove_all([handle for handle, _ in batch])
        return len(acked)

    def run(self, stop: threading.Event) -> None:
        """Flush until `stop` is set and nothing is left to ack."""
        backoff = 0.0
        while True:
            with self._cond:
                if not self._pending:
                    if stop.is_set():
                        break
                    self._cond.wait(0.2)
                    continue
            if self.window > 0:
                time.sleep(self.window)  # let other finishing jobs join this commit
            try:
                self._connections.recycle()
                self.run_once()
                backoff = 0.0
            except (DatabaseError, InterfaceError) as exc:
                backoff = min(max(backoff * 2, 0.1), 5.0)
                logger.warning("acker: database error, retrying in %.1fs: %s", backoff, exc)
                connections.close_all()
                time.sleep(backoff)
        connections.close_all()

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="alk-acker", daemon=True)
        thread.start()
        return thread
