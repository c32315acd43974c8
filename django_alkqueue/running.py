"""A job while its handler runs: its deadline, its cancel flag and the progress it reports.

`Run` is the worker's side, one per claimed job, shared by the handler's thread and the
worker's loops (the time limits, the heartbeat service, the listener); `RunningJob` is the
handler's side, the `job` argument every handler gets (docs/running-jobs.md).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from . import defaults
from .clock import system_clock
from .exceptions import InvalidOption
from .jobs import Job, Progress, without_init
from .outcomes import Cancelled
from .steps import CLAIM_LOST as STEP_CLAIM_LOST
from .steps import OUTSIDE_WORKER, Steps
from .validation import shown

#: The longest progress note stored; a longer one is cut.
MAX_NOTE_CHARS = 200

# Why a running job's cancel flag went up (Run.cancel_reason).
#: Queue.cancel or the admin's Cancel; the worker heard it by NOTIFY.
CANCELLED = "cancelled"
#: The heartbeat, or a durable step's record, was refused: the row is gone (cancelled,
#: purged) or was reclaimed. (steps.CLAIM_LOST, the reason of the Cancelled a step raises.)
CLAIM_LOST = STEP_CLAIM_LOST
#: The handler passed its time limit.
TIME_LIMIT = "time limit"


def _amount(value: object, option: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOption(f"{option} must be a number >= 0, not {shown(value, repr, 50)}")
    # An int past float's range is not finite here: math.isfinite() would raise OverflowError.
    if value < 0 or value > sys.float_info.max or not math.isfinite(value):
        raise InvalidOption(f"{option} must be a finite number >= 0, not {shown(value, repr)}")
    return value


def progress_values(done: object, total: object, note: object) -> tuple[float, float | None, str]:
    """job.progress()'s arguments, checked: InvalidOption for a bad one. A note no database
    can store (an unpaired surrogate, as in a file name read from disk) is refused here, at
    the call, rather than by the heartbeat that writes it; a NUL is fine (the stored
    JSON escapes it)."""
    if not isinstance(note, str):
        raise InvalidOption(f"note must be a string, not {type(note).__name__}")
    try:
        note.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidOption(
            "note contains an unpaired surrogate, which no database can store: "
            "clean it first, e.g. note.encode('utf-8', 'backslashreplace').decode()"
        ) from None
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
                 "deadline", "first_report", "started", "steps", "timed_out",
                 "timeout")  # fmt: skip

    def __init__(self, first_report: Callable[[], None] | None = None) -> None:
        #: Called on the job's first progress report: the heartbeat service's wake-up.
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
        #: What job.step reads and writes (steps.py); the worker sets a plain consumer's.
        self.steps: Steps = OUTSIDE_WORKER

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
    `progress(done, total, note)` in place of the progress read with the row. Built by
    `running_job`: its fields are the claimed Job's own (both are frozen), its Run in a slot."""

    __slots__ = ("_run",)
    _run: Run

    @property
    def progress(self) -> _Reporter:  # type: ignore[override]
        """`job.progress(done, total=None, note="")`: record how far the handler got."""
        return _Reporter(self._run)

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

    def step(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call `fn(*args, **kwargs)` and record its value under `name` for this job, then
        return it; on every later run of this job, return the recorded value without
        calling `fn` (docs/durable-steps.md). InvalidOption for a bad or reused name, or in
        an atomic or batch consumer; PayloadError for a value not storable as a payload;
        Cancelled when the claim is lost. An exception from `fn` propagates."""
        try:
            return self._run.steps.run(name, fn, args, kwargs)
        except Cancelled as stop:
            self._lost(stop)
            raise

    async def astep(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """`await job.astep(name, fn, *args, **kwargs)`: job.step for an `async def`
        handler; `fn` may be a coroutine function."""
        try:
            return await self._run.steps.arun(name, fn, args, kwargs)
        except Cancelled as stop:
            self._lost(stop)
            raise

    def sleep(self, name: str, when: timedelta | float | datetime) -> None:
        """Sleep until `when` (a positive duration, or an aware datetime) without holding a
        thread: the first time, the wake time is recorded under `name`; while it has not
        passed, the handler call ends here and the job is scheduled again at it, its attempt
        not counted. On the run after, the same `job.sleep` returns at once
        (docs/durable-steps.md). InvalidOption for a bad name or time, or in an atomic or
        batch consumer; Cancelled when the claim is lost."""
        try:
            self._run.steps.sleep(name, when)
        except Cancelled as stop:
            self._lost(stop)
            raise

    async def asleep(self, name: str, when: timedelta | float | datetime) -> None:
        """`await job.asleep(name, when)`: job.sleep for an `async def` handler."""
        try:
            await self._run.steps.asleep(name, when)
        except Cancelled as stop:
            self._lost(stop)
            raise

    def wait_for(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """The payload of the signal `name` sent to this job (`Queue.signal`), recorded under
        `name`. Until it comes, the handler call ends here and the job waits, its attempt not
        counted; the signal makes it pending again. With `timeout`, it resumes at the
        deadline and this raises WaitTimedOut (docs/durable-steps.md)."""
        try:
            return self._run.steps.wait_for(name, timeout)
        except Cancelled as stop:
            self._lost(stop)
            raise

    async def await_for(self, name: str, timeout: timedelta | float | None = None) -> Any:
        """`await job.await_for(name, timeout=None)`: job.wait_for for an `async def` handler."""
        try:
            return await self._run.steps.await_for(name, timeout)
        except Cancelled as stop:
            self._lost(stop)
            raise

    def _lost(self, stop: Cancelled) -> None:
        """A step's record refused for a lost claim: `cancelled` reads True from now on."""
        if stop.reason == CLAIM_LOST:
            self._run.cancel(CLAIM_LOST)


class _Reporter:
    """`job.progress(done, total=None, note="")`: record how far the handler got. Kept in
    memory and written with the next heartbeat, at most once a second; never a round
    trip of its own. Its attributes show the last report (or None)."""

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
    """`job` as its handler sees it, tied to `run`: the Job's fields shared, not copied (a
    copy per job was a tenth of a batch consumer's drain)."""
    running = without_init(RunningJob, vars(job))
    object.__setattr__(running, "_run", run)  # a slot, not a field: as __post_init__ would
    return running


def running_jobs(jobs: list[Job], runs: list[Run]) -> list[RunningJob]:
    """running_job() for the jobs of one batch handler call."""
    return [running_job(job, run) for job, run in zip(jobs, runs, strict=True)]


def run_of(job: RunningJob) -> Run:
    """The Run a running job is tied to: the worker's side of it."""
    return job._run
