"""Handler threads. Daemon threads, so that a handler stuck past the shutdown timeout cannot
keep the process alive once its claim has been released.

Python cannot stop a thread: a handler past its time limit keeps its thread until it
returns. The pool then writes that thread off (`write_off`): a new thread takes its place, so
the stuck one no longer counts as capacity, and it ends once its handler returns. The time
limits count the written-off threads still running past their grace (`stuck`)."""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import connections

from ..error_text import private_error_text
from ..jobs import Job
from ..privacy import is_sensitive
from ..queues import JobHandle
from ..reports.worker_report import job_fields

logger = logging.getLogger("django_alkqueue")


class ThreadPool:
    """`size` threads that each take the next submitted unit of work (the jobs of one
    handler call: one job, or a batch consumer's batch) and call `run(unit)` on it."""

    def __init__(
        self, size: int, run: Callable[[list[JobHandle]], None], name: str = "alk-handler"
    ) -> None:
        self._run = run
        self._name = name
        self._numbers = itertools.count(size)
        self._jobs: queue.SimpleQueue[list[JobHandle] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        #: The unit each thread is running now.
        self._current: dict[threading.Thread, list[JobHandle]] = {}
        #: Threads written off, and the time.monotonic() from which each counts as stuck.
        self._written_off: dict[threading.Thread, float] = {}
        self._threads = [self._thread(i) for i in range(size)]

    def _thread(self, number: int) -> threading.Thread:
        return threading.Thread(target=self._work, name=f"{self._name}-{number}", daemon=True)

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

    def write_off(self, handle: JobHandle, stuck_at: float) -> bool:
        """The thread running `handle` passed its time limit: start a thread in its place,
        and let it end once its handler returns; it is stuck from `stuck_at` (monotonic)
        if it has not by then. False when no thread runs `handle`, or it was written off."""
        with self._lock:
            thread = next((t for t, unit in self._current.items() if handle in unit), None)
            if thread is None or thread in self._written_off:
                return False
            self._written_off[thread] = stuck_at
            replacement = self._thread(next(self._numbers))
            self._threads.append(replacement)
        replacement.start()
        return True

    def stuck(self, at: float | None = None) -> int:
        """Threads written off and still in their handler past their `stuck_at`."""
        at = time.monotonic() if at is None else at
        with self._lock:
            return sum(1 for stuck_at in self._written_off.values() if at >= stuck_at)

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` in all (not per thread) for the threads to end."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))

    def _work(self) -> None:
        me = threading.current_thread()
        while (unit := self._jobs.get()) is not None:
            with self._lock:
                self._current[me] = unit
            try:
                self._run(unit)
            # BaseException, not Exception: whatever one job raises (a handler's
            # KeyboardInterrupt, which the executor passes on), the thread lives on to take
            # the next job; a dead thread would leave its jobs unstarted for good.
            except BaseException as error:
                _log_escaped(unit[0].job, error)  # a batch's jobs share the queue and call
            with self._lock:
                del self._current[me]
                if self._written_off.pop(me, None) is not None:
                    break  # another thread took this one's place
        connections.close_all()


def _log_escaped(job: Job, error: BaseException) -> None:
    """What escaped a handler thread's run, logged; for a sensitive queue without the
    exception's message (error_text.py), which may quote the payload."""
    what = "unexpected error in a handler thread running %s job %s"
    if not is_sensitive(job.queue):
        logger.exception(what, job.queue, job.id, extra=job_fields(job))
        return
    logger.error(what + ":\n%s", job.queue, job.id, private_error_text(error),
                 extra=job_fields(job))  # fmt: skip
