"""The jobs this worker holds: claimed and not yet finished.

A job is *running* from its claim until its handler returns, then *awaiting its ack* until the
AckService's next commit. Only running jobs take capacity, so claiming goes on during the ack window
(up to a full ack batch behind: Claimer.room).

Handles are kept as themselves (one handle per claim), not by job id: a job whose lease
lapsed while its ack waited (a locked table, a slow commit) can be claimed again by this very
worker, and then the old handle and the new one are held at once, each with its own fate.
"""

from __future__ import annotations

import threading

from ..queues import JobHandle
from ..running import Run


class InFlight:
    def __init__(self, changed: threading.Event | None = None) -> None:
        self._lock = threading.Lock()
        # Each held job's Run (its deadline, cancel flag, progress); a dict for its order:
        # oldest claim first.
        self._held: dict[JobHandle, Run] = {}
        self._atomic: set[JobHandle] = set()
        self._running: set[JobHandle] = set()
        #: Set whenever a job stops running: the claimer's wake-up.
        self.changed = changed or threading.Event()
        #: Set when a running job first reports progress: the heartbeat service's wake-up.
        self.reported = threading.Event()
        self._first_report = self.reported.set  # one bound method for every Run

    def add(self, handle: JobHandle) -> None:
        self.add_all([handle])

    def add_all(self, handles: list[JobHandle]) -> None:
        """Hold a claim's jobs, running from now: one lock for the claim, not one per job."""
        with self._lock:
            for handle in handles:
                self._held[handle] = Run(self._first_report)
            self._running.update(handles)

    def begin_all(self, handles: list[JobHandle]) -> list[JobHandle]:
        """begin() for a batch, under one lock: the jobs this worker still holds."""
        with self._lock:
            return [handle for handle in handles if handle in self._held]

    def begin(self, handle: JobHandle) -> bool:
        """A handler thread is about to run the job: True while this worker still holds it.
        False once shutdown let it go (removed, then released): then it must not start. The
        check and that removal take one lock, so no handler starts on a released job."""
        with self._lock:
            return handle in self._held

    def hold_in_transaction(self, handle: JobHandle) -> None:
        """An atomic handler's transaction is about to lock the job's row until it commits:
        from now on the heartbeat service leaves it alone (nobody else can claim a locked row)."""
        with self._lock:
            self._atomic.add(handle)

    def in_transaction(self, handle: JobHandle) -> bool:
        with self._lock:
            return handle in self._atomic

    def handlers_done(self, handles: list[JobHandle], wake: bool = True) -> None:
        """The handler returned for these jobs (one job, or a batch); they may still await
        their ack. `wake`: whether the claimer is woken for the threads they free."""
        with self._lock:
            self._running.difference_update(handles)
        # Event.set takes the event's lock and notifies; a draining worker finishes a job
        # every few microseconds, and the claimer has seldom cleared the event in between.
        # Reading it set is safe: the claimer clears it before it counts the free slots,
        # and the slot was freed (above) before the read.
        if wake and not self.changed.is_set():
            self.changed.set()

    def remove(self, handle: JobHandle) -> None:
        self.remove_all([handle])

    def remove_all(self, handles: list[JobHandle]) -> None:
        """Let go of many at once (an ack batch): one lock and one wake-up, not one per job."""
        with self._lock:
            for handle in handles:
                self._held.pop(handle, None)
            self._atomic.difference_update(handles)
            self._running.difference_update(handles)
        self.changed.set()

    def count(self) -> int:
        """Jobs held: running or awaiting their ack."""
        with self._lock:
            return len(self._held)

    def is_running(self, handle: JobHandle) -> bool:
        with self._lock:
            return handle in self._running

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def awaiting_ack(self) -> int:
        """Jobs whose handler returned and whose ack has not committed yet."""
        with self._lock:
            return len(self._held) - len(self._running)

    def to_heartbeat(self) -> list[JobHandle]:
        """Handles whose lease the heartbeat service extends: all but those held in an atomic
        transaction and those past their time limit (their lease is let go at once)."""
        with self._lock:
            return [
                h for h, run in self._held.items() if h not in self._atomic and not run.timed_out
            ]

    def run_of(self, handle: JobHandle) -> Run:
        """The job's Run; a fresh one when the job is no longer held (it will not start)."""
        with self._lock:
            return self._held.get(handle) or Run()

    def runs_of(self, handles: list[JobHandle]) -> list[Run]:
        """run_of() for the jobs of one batch handler call, under one lock."""
        with self._lock:
            return [self._held.get(handle) or Run() for handle in handles]

    def runs(self) -> list[tuple[JobHandle, Run]]:
        """The running jobs (handler not returned yet) and their Runs, oldest claim first."""
        with self._lock:
            return [(h, run) for h, run in self._held.items() if h in self._running]

    def cancel(self, job_id: int, reason: str) -> bool:
        """Raise the cancel flag of the held job `job_id`; False when none is held."""
        with self._lock:
            runs = [run for h, run in self._held.items() if h.job.id == job_id]
        for run in runs:
            run.cancel(reason)
        return bool(runs)

    def all(self) -> list[JobHandle]:
        with self._lock:
            return list(self._held)
