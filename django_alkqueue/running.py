"""A job while its handler runs: its deadline, its cancel flag and the progress it reports.

`Run` is the worker's side, one per claimed job, shared by the handler's thread and the
worker's loops (the time limits, the lease keeper, the listener); `RunningJob` is the
handler's side, the `job` argument every handler gets (docs/running-jobs.md).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from . import defaults
from .clock import system_clock
from .exceptions import InvalidOption
from .jobs import Job, Progress
from .outcomes import Cancelled

#: The longest progress note stored; a longer one is cut.
MAX_NOTE_CHARS = 200

# Why a running job's cancel flag went up (Run.cancel_reason).
#: Queue.cancel or the admin's Cancel; the worker heard it by NOTIFY.
CANCELLED = "cancelled"
#: The lease renewal was refused: the row is gone (cancelled, purged) or was reclaimed.
CLAIM_LOST = "claim lost"
#: The handler passed its time limit.
TIME_LIMIT = "time limit"


def _amount(value: object, option: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOption(f"{option} must be a number >= 0, not {value!r:.50}")
    if not math.isfinite(value) or value < 0:
        raise InvalidOption(f"{option} must be a finite number >= 0, not {value!r}")
    return value


def progress_values(done: object, total: object, note: object) -> tuple[float, float | None, str]:
    """job.progress()'s arguments, checked: InvalidOption for a bad one."""
    if not isinstance(note, str):
        raise InvalidOption(f"note must be a string, not {type(note).__name__}")
    checked_done = _amount(done, "done")
    assert checked_done is not None
    return checked_done, _amount(total, "total", optional=True), note[:MAX_NOTE_CHARS]


#: Guards the few fields of every Run that two threads write (the settle, the cancel
#: reason, the progress). One lock for all: each use is a handful of attribute writes, and a
#: lock of its own would cost each claimed job a lock's creation on the claim's hot path.
_LOCK = threading.Lock()


class Run:
    """One attempt of one job in this worker, from its claim to its outcome."""

    __slots__ = ("_progress", "_settled", "_unwritten", "_written_at", "cancel_reason",
                 "deadline", "first_report", "started", "timed_out", "timeout")  # fmt: skip

    def __init__(self, first_report: Callable[[], None] | None = None) -> None:
        #: Called on the job's first progress report: the lease keeper's wake-up.
        self.first_report = first_report
        #: The consumer's time limit in seconds; None: none. Set by `start`.
        self.timeout: float | None = None
        #: When the handler must be done (aware); set when it starts (`start`).
        self.deadline: datetime | None = None
        #: Set once the handler passed its deadline and the worker failed the attempt.
        self.timed_out = False
        #: Why the cancel flag is up (CANCELLED, TIME_LIMIT, CLAIM_LOST); None: it is not.
        self.cancel_reason: str | None = None
        self._settled = False
        self._progress: Progress | None = None
        self._unwritten = False
        self._written_at = -math.inf
        #: time.monotonic() when the handler was called.
        self.started = 0.0

    def start(self, clock: Callable[[], datetime], timeout: float | None, at: float) -> None:
        """The handler is about to be called (at `at`, a time.monotonic() reading): the
        deadline counts from now, as `clock` reads it (read only when there is a limit)."""
        start_all([self], clock, timeout, at)

    # -- the cancel flag -------------------------------------------------------------------

    def cancel(self, reason: str) -> None:
        """Raise the flag the handler reads (job.cancelled); the first reason stays."""
        with _LOCK:
            if self.cancel_reason is None:
                self.cancel_reason = reason

    @property
    def cancelled(self) -> bool:
        return self.cancel_reason is not None

    # -- the outcome -----------------------------------------------------------------------

    def settle(self) -> bool:
        """Take the right to settle this attempt: True once, for the first caller (the
        handler's thread when it returns, or the time limits when the deadline passed)."""
        with _LOCK:
            if self._settled:
                return False
            self._settled = True
            return True

    def time_out(self, now: datetime) -> bool:
        """True once, when the deadline has passed: the time limits then raise the cancel
        flag, and fail the attempt unless its handler settled it first (`settle`)."""
        if self.deadline is None or now < self.deadline:
            return False
        with _LOCK:
            if self.timed_out:
                return False
            self.timed_out = True
        self.cancel(TIME_LIMIT)
        return True

    # -- progress --------------------------------------------------------------------------

    def report(self, done: float, total: float | None, note: str, now: datetime) -> None:
        with _LOCK:
            first = self._progress is None
            self._progress = Progress(done, total, note, now)
            self._unwritten = True
        if first and self.first_report is not None:
            self.first_report()

    @property
    def progress(self) -> Progress | None:
        return self._progress

    def progress_due(self, at: float | None = None) -> Progress | None:
        """Progress not written yet, when the last write is a second old or more (at is a
        time.monotonic() reading)."""
        at = time.monotonic() if at is None else at
        with _LOCK:
            if not self._unwritten or at - self._written_at < defaults.PROGRESS_EVERY:
                return None
            return self._progress

    def progress_written(self, progress: Progress, at: float | None = None) -> None:
        with _LOCK:
            self._written_at = time.monotonic() if at is None else at
            if self._progress is progress:
                self._unwritten = False


def start_all(
    runs: list[Run], clock: Callable[[], datetime], timeout: float | None, at: float
) -> None:
    """Run.start() for the jobs of one handler call: one clock reading and one deadline for
    all, no call per job."""
    deadline = None if timeout is None else clock() + timedelta(seconds=timeout)
    for run in runs:
        run.timeout = timeout
        run.started = at
        run.deadline = deadline


def settle_all(runs: list[Run]) -> list[bool]:
    """Run.settle() for the jobs of one batch handler call, under one taking of the lock."""
    with _LOCK:
        taken = [not run._settled for run in runs]
        for run in runs:
            run._settled = True
    return taken


class RunningJob(Job):
    """The `job` a handler gets: the Job as claimed, plus its deadline (`deadline`,
    `remaining()`), its cancel flag (`cancelled`, `check_cancelled()`) and
    `progress(done, total, note)`. Built by `running_job`, never by the constructor."""

    # The Run in a slot, the fields in the Job's own __dict__, shared (both are frozen):
    # a copy of the fields per job was a tenth of a batch consumer's drain.
    __slots__ = ("_run",)
    _run: Run

    @property
    def deadline(self) -> datetime | None:
        """When the time limit passes (aware); None without a timeout."""
        return self._run.deadline

    def remaining(self) -> float:
        """Seconds left before the time limit (0.0 once passed); math.inf without one."""
        deadline = self._run.deadline
        if deadline is None:
            return math.inf
        return max((deadline - system_clock()).total_seconds(), 0.0)

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled, or passed its time limit, while it ran."""
        return self._run.cancelled

    def check_cancelled(self) -> None:
        """Raise Cancelled when `cancelled`: call it between steps of long work."""
        if self._run.cancelled:
            raise Cancelled(self._run.cancel_reason or "cancelled")

    @property
    def progress(self) -> _Reporter:  # type: ignore[override]
        """`job.progress(done, total=None, note="")`: record how far the handler got. Kept in
        memory and written with the next lease renewal, at most once a second; never a
        round trip of its own."""
        return _Reporter(self._run)


class _Reporter:
    """job.progress: call it to report; its attributes show the last report (or None)."""

    def __init__(self, run: Run) -> None:
        self._run = run

    def __call__(self, done: float, total: float | None = None, note: str = "") -> None:
        checked = progress_values(done, total, note)
        self._run.report(*checked, system_clock())

    def __getattr__(self, name: str) -> Any:
        if name in ("done", "total", "note", "updated_at"):
            last = self._run.progress
            return None if last is None else getattr(last, name)
        raise AttributeError(name)

    def __repr__(self) -> str:
        return f"<progress {self._run.progress!r}>"


def running_job(job: Job, run: Run) -> RunningJob:
    """`job` as its handler sees it, tied to `run`."""
    return running_jobs([job], [run])[0]


def running_jobs(jobs: list[Job], runs: list[Run]) -> list[RunningJob]:
    """running_job() for the jobs of one batch handler call, no call per job."""
    called = []
    new, set_field = object.__new__, object.__setattr__
    for job, run in zip(jobs, runs, strict=True):
        running = new(RunningJob)
        set_field(running, "__dict__", job.__dict__)
        set_field(running, "_run", run)
        called.append(running)
    return called
