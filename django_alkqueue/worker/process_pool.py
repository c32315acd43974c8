"""The process pool (`alk_worker --pool process`, docs/running-jobs.md): handlers run in
child processes, which a time limit or a cancel can stop.

The worker itself is unchanged: it claims, heartbeats leases, acks and retries as with threads.
Each of its `--concurrency` handler threads (ProcessPool, a ThreadPool) owns one child
(`Child`), sends it each handler call (`Work`) and waits for the outcome, meanwhile passing
the job's cancel flag down and its progress reports up. So the child only runs handlers:
- it returns or raises: the outcome comes back (wire.py) and settles as in the thread pool;
- past the time limit: the time limits fail the attempt as in the thread pool, and the pool
  terminates the child (SIGTERM, then SIGKILL after `kill_grace`);
- cancelled: the flag goes down the pipe; a handler that has not returned `kill_grace`
  seconds later has its child terminated, and the attempt ends as Cancelled;
- it dies (a signal from outside, a segfault, os._exit): the attempt fails with
  WorkerChildDied naming the signal or the exit status, through the retry policy; when
  the job took the child down itself (child_exits.py), a crash is counted with that retry,
  and its second crash dead-letters it ("crashed its worker");
- atomic consumers run the handler and the ack in the child's own transaction.
A child that ended, was terminated, or ran `max_jobs_per_child` calls is replaced.

Children fork from a fork server (multiprocessing's "forkserver"), not from the worker: see
forkserver_setup.py and docs/running-jobs.md for why.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import timedelta
from multiprocessing.connection import wait
from typing import Any

from .. import operations, signals
from ..consumers import ConsumerSpec
from ..error_text import logged_line
from ..exceptions import TimeLimitExceeded, WorkerChildDied
from ..jobs import Job
from ..outcomes import Cancelled
from ..queues import JobHandle
from ..reports.worker_report import job_fields
from ..running import CANCELLED, CLAIM_LOST, TIME_LIMIT, Run, RunningJob, run_of, running_job
from ..sql import CrashRetry
from . import child as child_module
from .child_exits import crashed_by_its_job, death_text
from .executor import HANDLER_ERRORS, Executor, LostClaim, error_text
from .pool import ThreadPool
from .step_records import ClaimedSteps
from .wire import Outcome, Raised, Work, rebuilt

logger = logging.getLogger("django_alkqueue")

#: Seconds between two looks at a running job's cancel flag and its child's kill deadline.
POLL = 0.05
#: Seconds a new child may take to say it is ready before its first call is sent anyway.
READY_WITHIN = 60.0
#: Why a child was terminated at the worker's exit (Child.terminated_for).
SHUTDOWN = "shutdown"
#: The start method, and the module the fork server imports before forking any child.
START_METHOD = "forkserver"
PRELOAD = ["django_alkqueue.worker.forkserver_setup"]


def _context() -> Any:
    context = multiprocessing.get_context(START_METHOD)
    context.set_forkserver_preload(PRELOAD)
    return context


class Child:
    """One child process and the pipe to it, as its handler thread in the worker sees it."""

    def __init__(self, context: Any, using: str) -> None:
        ours, theirs = context.Pipe()
        self.process = context.Process(
            target=child_module.main, args=(theirs, using), name="alk-child", daemon=True
        )
        self.process.start()
        theirs.close()
        self.conn = ours
        self.pid: int = self.process.pid
        #: Handler calls run.
        self.calls = 0
        #: time.monotonic() after which a terminated child is killed; None: not terminated.
        self.kill_at: float | None = None
        #: Why the pool terminated it (TIME_LIMIT, or a cancel's reason).
        self.terminated_for: str | None = None
        #: It said "ready": set up and serving, so a death mid-call is the call's doing
        #: (a child whose set-up failed blames no job).
        self.ready = False

    def alive(self) -> bool:
        return self.kill_at is None and self.process.is_alive()

    def wait_ready(self, timeout: float) -> None:
        """Wait for the child's "ready" (sent once it is set up), its end, or `timeout`:
        a job's time limit starts after this, so it never counts a new child's start."""
        if not self.conn.poll(timeout):
            return  # it ended, or is slow: the call notices either
        with suppress(EOFError, OSError):
            self.conn.recv()  # its "ready": nothing else is sent before a call
            self.ready = True

    def terminate(self, grace: float, why: str) -> None:
        """SIGTERM now, SIGKILL `grace` seconds later if it has not ended by then."""
        if self.kill_at is not None:
            return
        self.kill_at = time.monotonic() + grace
        self.terminated_for = why
        self._signal(signal.SIGTERM)

    def stop(self, timeout: float) -> None:
        """Ask it to end (idle), then make sure it did within `timeout`."""
        with suppress(OSError):
            self.conn.send(("stop",))
        self.process.join(timeout)
        if self.process.is_alive():
            self._signal(signal.SIGKILL)
            self.process.join(1.0)
        self.conn.close()

    def call(self, work: Work, runs: dict[int, Run], grace: float) -> Outcome:
        """Run `work` in the child and return its outcome; raises WorkerChildDied when the
        child ends first, Cancelled when the pool terminated it for a cancel."""
        try:
            self.conn.send(("run", work))
        except OSError:  # it ended since the last call
            raise self._death(mid_call=False) from None
        self.calls += 1
        relayed: set[int] = set()
        answer_by: float | None = None  # a cancelled call must return by then
        while True:
            answer_by = self._relay(runs, relayed, grace, answer_by)
            if answer_by is not None and time.monotonic() >= answer_by:
                self.terminate(grace, next(iter(runs.values())).cancel_reason or "cancelled")
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                self._signal(signal.SIGKILL)
            ready = wait([self.conn, self.process.sentinel], POLL)
            if self.conn in ready or (ready and self.conn.poll()):
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    raise self._death() from None
                if message[0] == "outcome":
                    outcome: Outcome = message[1]
                    return outcome
                if message[0] == "ready":  # a late one, when wait_ready gave up
                    self.ready = True
                else:
                    _progress(runs, message)
            elif ready:
                raise self._death()

    def _relay(
        self, runs: dict[int, Run], relayed: set[int], grace: float, answer_by: float | None
    ) -> float | None:
        """Pass new cancels down; returns when the call must have returned: `grace` after
        every job of it was cancelled (a time limit terminates the child on its own)."""
        for job_id, run in runs.items():
            reason = run.cancel_reason
            if reason is not None and job_id not in relayed:
                relayed.add(job_id)
                with suppress(OSError):
                    self.conn.send(("cancel", self.calls, job_id, reason))
        every_one = len(relayed) == len(runs)
        if answer_by is None and every_one and TIME_LIMIT not in _reasons(runs):
            return time.monotonic() + grace
        return answer_by

    def _death(self, mid_call: bool = True) -> Exception:
        """What the call ends with when the child ended first: Cancelled when the pool
        terminated it for a cancel (or a lost claim), else WorkerChildDied, `crashed` when
        the call took the child down itself: it was serving (ready), had the call
        (`mid_call`), was not terminated by the pool, and its exit says so (child_exits)."""
        self.process.join(1.0)
        exitcode = self.process.exitcode
        text = death_text(self.pid, exitcode)
        if self.terminated_for in (CANCELLED, CLAIM_LOST):
            return Cancelled(f"{self.terminated_for}; {text} after it did not return")
        ours = mid_call and self.ready and self.terminated_for is None
        return WorkerChildDied(text, crashed=ours and crashed_by_its_job(exitcode))

    def _signal(self, signum: int) -> None:
        with suppress(ProcessLookupError):
            os.kill(self.pid, signum)


def _reasons(runs: dict[int, Run]) -> set[str | None]:
    return {run.cancel_reason for run in runs.values()}


def _progress(runs: dict[int, Run], message: tuple[Any, ...]) -> None:
    _, job_id, done, total, note, at = message
    run = runs.get(job_id)
    if run is not None:
        run.report(done, total, note, at)


class Children:
    """The worker's children: one per handler thread, made on first use, replaced when one
    ended, was terminated or ran `max_jobs_per_child` calls."""

    def __init__(self, using: str, kill_grace: float, max_jobs_per_child: int | None) -> None:
        self.using = using
        self.kill_grace = kill_grace
        self.max_jobs_per_child = max_jobs_per_child
        self._context = _context()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: set[Child] = set()
        #: The child running each job, by job id.
        self._running: dict[int, Child] = {}

    def current(self) -> Child:
        """This handler thread's child, a fresh one when it has none or its one ended."""
        child: Child | None = getattr(self._local, "child", None)
        if child is not None and child.alive():
            return child
        if child is not None:
            self._retire(child)
        child = self._local.child = Child(self._context, self.using)
        with self._lock:
            self._all.add(child)
        child.wait_ready(READY_WITHIN)
        return child

    def call(self, work: Work, runs: dict[int, Run]) -> Outcome:
        child = self.current()
        with self._lock:
            self._running.update(dict.fromkeys(runs, child))
        try:
            return child.call(work, runs, self.kill_grace)
        finally:
            with self._lock:
                for job_id in runs:
                    if self._running.get(job_id) is child:
                        del self._running[job_id]
            if self.max_jobs_per_child is not None and child.calls >= self.max_jobs_per_child:
                self._retire(child)
                self._local.child = None

    def terminate(self, job: Job, why: str) -> bool:
        """Terminate the child running `job`; False when none does."""
        with self._lock:
            child = self._running.get(job.id)
        if child is None:
            return False
        logger.warning("terminating child %d (job %s: %s)", child.pid, job.id, why,
                       extra=job_fields(job))  # fmt: skip
        child.terminate(self.kill_grace, why)
        return True

    def retire_current(self) -> None:
        child: Child | None = getattr(self._local, "child", None)
        if child is not None:
            self._retire(child)
            self._local.child = None

    def terminate_all(self, timeout: float) -> None:
        """Shutdown: children still running a job (released by now) are terminated; all
        are gone within `timeout` plus a second."""
        with self._lock:
            busy = set(self._running.values())
            children = list(self._all)
        for child in busy:
            child.terminate(timeout, SHUTDOWN)
        deadline = time.monotonic() + timeout
        for child in children:
            child.process.join(max(deadline - time.monotonic(), 0))
        for child in children:
            if child.process.is_alive():
                child._signal(signal.SIGKILL)

    def _retire(self, child: Child) -> None:
        with self._lock:
            self._all.discard(child)
        child.stop(self.kill_grace)


class ProcessPool(ThreadPool):
    """Handler threads that each run their calls in their own child (Children)."""

    def __init__(
        self, size: int, run: Callable[[list[JobHandle]], None], children: Children
    ) -> None:
        super().__init__(size, run, name="alk-process")
        self.children = children

    def write_off(self, handle: JobHandle, stuck_at: float) -> bool:
        """Past its time limit: terminate the job's child. No thread is written off."""
        return self.children.terminate(handle.job, TIME_LIMIT)

    def stuck(self, at: float | None = None) -> int:
        return 0  # a child past its limit is killed: nothing stays stuck

    def join(self, timeout: float) -> None:
        self.children.terminate_all(self.children.kill_grace)
        super().join(timeout)

    def _work(self) -> None:
        try:
            try:  # start the child before the first job needs it
                self.children.current()
            except Exception:  # the first job tries again, and fails its attempt with why
                logger.exception("could not start a process-pool child")
            super()._work()
        finally:
            self.children.retire_current()


class ProcessExecutor(Executor):
    """The executor, with every handler call sent to the calling thread's child."""

    def __init__(self, *args: Any, children: Children, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.children = children
        self.coroutine_queues = set()  # the child runs coroutines on its own event loop
        #: The claim of the atomic job this thread runs: the child locks and acks it.
        self._atomic_claim = threading.local()

    def claimed(self, handles: list[JobHandle]) -> None:
        """A child reads the steps of the one job it runs (child.py): none are read here."""

    def _prepare(self) -> None:
        self.children.current()

    def _invoke(self, spec: ConsumerSpec, jobs: list[Job], *args: Any) -> Any:
        running: list[RunningJob] = args[-1] if isinstance(args[-1], list) else [args[-1]]
        runs = {job.id: run_of(job) for job in running}
        first = run_of(running[0])
        claim = getattr(self._atomic_claim, "claim", None) if spec.atomic else None
        steps = first.steps if isinstance(first.steps, ClaimedSteps) else None
        work = Work(spec.queue, jobs, first.deadline, first.timeout, claim,
                    None if steps is None else steps.claim)  # fmt: skip
        outcome = self.children.call(work, runs)
        if steps is not None and outcome.with_steps:
            steps.wrote = True  # recorded or found in the child: the ack deletes them
        if outcome.kind == "lost":
            raise LostClaim
        if outcome.kind == "raised":
            assert outcome.error is not None
            raise rebuilt(outcome.error)
        return _failures(outcome.value)

    def _run_atomic(self, spec: ConsumerSpec, handle: JobHandle, run: Run, started: float) -> bool:
        """The child locks the claim, runs the handler and acks in its own transaction
        (child.py); here, the outcome is settled as the thread pool settles its own."""
        job = handle.job
        self.inflight.hold_in_transaction(handle)
        run.settle()  # the time limits never settle a job whose row a transaction holds
        self._atomic_claim.claim = handle.claim
        try:
            self.call(spec, [handle], job.payload, running_job(job, run))
        except LostClaim:
            self._report(handle, "lost", started)
            return False
        except KeyboardInterrupt:
            raise
        except HANDLER_ERRORS as error:
            # Terminated at its time limit, or past it at the commit: that is its error.
            overran = TimeLimitExceeded(run.timeout or 0) if _overran(run, handle) else None
            self._settle_failure(spec, handle, overran or error, started)
            return False
        finally:
            self._atomic_claim.claim = None
        handle.settled_by_worker()
        self._report(handle, "succeeded", started)
        signals.announce(signals.job_succeeded, Job, job=job)
        return False

    def _settle_failure(
        self, spec: ConsumerSpec, handle: JobHandle, error: BaseException, started: float
    ) -> None:
        """A job that took its child down itself (WorkerChildDied.crashed) is retried with a
        crash counted (_settle_crash); every other failure settles as in the thread pool."""
        if isinstance(error, WorkerChildDied) and error.crashed and spec.retry.retries(error):
            self._settle_crash(spec, handle, error, started)
        else:
            super()._settle_failure(spec, handle, error, started)

    def _settle_crash(
        self, spec: ConsumerSpec, handle: JobHandle, error: WorkerChildDied, started: float
    ) -> None:
        """Retry on the policy's curve as any failure, in one statement that also counts the
        crash: at its second crash the job is dead ("crashed its worker") instead, so a job
        that kills every child it runs in does not use up all its attempts first."""
        job = handle.job
        text = error_text(error, job.queue in self.sensitive)
        now = handle.queue.clock()
        run_at = now + timedelta(seconds=spec.retry.delay(job.attempts, job.backoff_base))
        retry = CrashRetry(run_at, text, out_of_attempts=job.attempts >= job.max_attempts)
        valid, dead = operations.crashed(self.using, handle.claim, now, retry)
        if not valid:
            self._report(handle, "lost", started)
            return
        handle.settled_by_worker()
        if dead is not None:
            self._report(handle, "dead", started, f"{logged_line(text)} ({dead.reason})")
            return
        self._report(handle, "retried", started, logged_line(text))
        signals.announce(signals.job_retried, Job, job=job)


def _overran(run: Run, handle: JobHandle) -> bool:
    return run.timed_out or (run.deadline is not None and handle.queue.clock() >= run.deadline)


def _failures(value: Any) -> Any:
    """A batch handler's failures rebuilt into exceptions; any other value as it came."""
    if isinstance(value, Mapping) and value and all(isinstance(v, Raised) for v in value.values()):
        return {job_id: rebuilt(error) for job_id, error in value.items()}
    return value
