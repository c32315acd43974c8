"""Handler threads. Daemon threads, so that a handler stuck past the shutdown timeout cannot
keep the process alive once its claim has been released."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import connections

from ..queues import JobHandle
from .report import job_fields

logger = logging.getLogger("django_alkqueue")


class ThreadPool:
    """`size` threads that each take the next submitted unit of work (the jobs of one
    handler call: one job, or a batch consumer's batch) and call `run(unit)` on it."""

    def __init__(
        self, size: int, run: Callable[[list[JobHandle]], None], name: str = "alk-handler"
    ) -> None:
        self._run = run
        self._jobs: queue.SimpleQueue[list[JobHandle] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, unit: list[JobHandle]) -> None:
        self._jobs.put(unit)

    def stop(self) -> list[JobHandle]:
        """Take back every job no thread has started, then tell the threads to end once
        their current job is done. Returns the jobs taken back, in claim order: a
        shutdown must not start work it is about to give back."""
        unstarted: list[JobHandle] = []
        while True:
            try:
                unit = self._jobs.get_nowait()
            except queue.Empty:
                break
            if unit is not None:
                unstarted.extend(unit)
        for _ in self._threads:
            self._jobs.put(None)
        return unstarted

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` in all (not per thread) for the threads to end."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))

    def _work(self) -> None:
        while (unit := self._jobs.get()) is not None:
            try:
                self._run(unit)
            # BaseException, not Exception: whatever one job raises (a handler's
            # KeyboardInterrupt, which the executor passes on), the thread lives on to take
            # the next job; a dead thread would leave its jobs unstarted for good.
            except BaseException:
                job = unit[0].job  # a batch's jobs share the queue, the call and the worker
                logger.exception("unexpected error in a handler thread running %s job %s",
                                 job.queue, job.id, extra=job_fields(job))  # fmt: skip
        connections.close_all()
