"""Run one claimed job: call its handler, then turn the outcome into ack, retry or fail.

- the handler returns            -> ack (grouped with other acks by the AckService); a queue that
                                    keeps history records the returned value (history.py)
- it raises Retry(delay)         -> retry after delay, or the policy's curve
- it raises Snooze(delay)        -> pending again after delay, the attempt refunded
- it raises Fail(reason)         -> dead letter now
- an exception outside retry_on  -> dead letter now
- any other exception            -> retry on the policy's curve; dead letter when out of attempts
- it raises Cancelled            -> no retry, no dead letter: the job is gone (job.cancelled)
- job.sleep / job.wait_for end   -> scheduled again at the wake time, or waiting for the
  the call (steps.Suspended)        signal, the attempt refunded (counted as snoozed)
- it runs past its timeout       -> TimeLimitExceeded, settled by the time limits (time_limits.py)
  like any other exception, while the handler still runs; what it does later is discarded
A batch consumer's handler takes many jobs in one call, and the same rules apply to each job
(see `run_batch`). Atomic consumers run the handler and the ack in one transaction (see
`run_atomic`).
"""

from __future__ import annotations

import inspect
import logging
import time
import traceback
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.db import transaction

from .. import history, operations, signals, tracing, validation
from ..consumers import ConsumerSpec
from ..error_text import headline, logged_line, private_error_text
from ..exceptions import InvalidOption, TimeLimitExceeded, WorkerChildDied
from ..jobs import Job
from ..outcomes import Cancelled, Fail, Retry, Snooze
from ..privacy import is_sensitive
from ..queues import JobHandle, record_history_all
from ..reports.worker_report import job_fields, report_outcome
from ..reports.worker_stats import WorkerStats
from ..running import CANCELLED, CLAIM_LOST, Run, running_job, running_jobs, settle_all, start_all
from ..steps import IN_ATOMIC, IN_BATCH, Sleeping, Waiting
from .acker import AckService
from .connections import ThreadConnections, ages_connections
from .event_loop import EventLoopThread
from .inflight import InFlight
from .job_notices import NoNotices
from .step_records import ClaimedSteps, ClaimStepsLoad
from .wire import child_error_text

logger = logging.getLogger("django_alkqueue")


# What a handler may raise and still leave the worker whole: anything. A BaseException that
# is not an Exception is still a failure of that job, not of the worker: SystemExit (a
# library calling sys.exit), asyncio.CancelledError (a handler running a coroutine that
# was cancelled), GeneratorExit, a project's own BaseException subclass. Letting one through
# would kill the handler thread with the job still claimed and its lease extended for ever.
# KeyboardInterrupt alone is passed on (see `run`): it asks to stop, it is not a job's error.
HANDLER_ERRORS = (BaseException,)


class LostClaim(Exception):
    """The claim was gone before an atomic handler could commit: roll everything back."""


def _retry_delay(request: Retry, handle: JobHandle) -> float | None:
    """The delay a handler asked for; a bad one falls back to the policy, with a warning."""
    if request.delay is None:
        return None
    try:
        return validation.seconds(request.delay, "delay")
    except InvalidOption as exc:
        job = handle.job
        logger.warning("%s job %s: %s; using the retry policy instead",
                       job.queue, job.id, exc, extra=job_fields(job))  # fmt: skip
        return None


def error_text(error: BaseException, sensitive: bool = False) -> str:
    """`ExceptionClass: message`, then the traceback. For a sensitive queue every exception
    message is withheld (`private_error_text`). An exception from a process-pool child
    comes with the text the child wrote, where its traceback was (wire.py)."""
    if (written := child_error_text(error)) is not None:
        return written
    if sensitive:
        return private_error_text(error)
    if isinstance(error, TimeLimitExceeded | WorkerChildDied):  # raised by nobody: no traceback
        return headline(error)
    return headline(error) + "\n\n" + "".join(traceback.format_exception(error)).rstrip()


def _private_text(error: BaseException) -> str:
    return error_text(error, sensitive=True)


def batch_failures(result: object, jobs: list[Job]) -> dict[int, BaseException]:
    """A batch handler's return value, checked: None (no failures) or a mapping of the ids of
    jobs in its call to the exceptions they failed with. Anything else is a TypeError, which
    fails the whole call: a handler that returns the wrong thing must not ack jobs."""
    if result is None:
        return {}
    if not isinstance(result, Mapping):
        raise TypeError("a batch handler returns None or a mapping of job id to exception, "
                        f"not {type(result).__name__}")  # fmt: skip
    ids = {job.id for job in jobs}
    for job_id, error in result.items():
        if job_id not in ids:
            shown = validation.shown(job_id, repr)
            raise TypeError(f"a batch handler returned a failure for job {shown}, "
                            "which is not in its call")  # fmt: skip
        if not isinstance(error, BaseException):
            shown = validation.shown(error, repr)
            raise TypeError(f"a batch handler returned {shown} for job {job_id}, "
                            "not an exception")  # fmt: skip
    return dict(result)


class Executor:
    def __init__(
        self,
        specs: dict[str, ConsumerSpec],
        acker: AckService,
        inflight: InFlight,
        stats: WorkerStats,
        using: str,
    ) -> None:
        self.specs = specs
        self.acker = acker
        self.inflight = inflight
        self.stats = stats
        self.using = using
        self.recycle_before = ages_connections()
        #: Queues whose payloads must not reach an error text (privacy.py).
        self.sensitive = {name for name in specs if is_sensitive(name)}
        self.connections = ThreadConnections(watch=False)  # the pool threads watch their own
        #: Queues whose handler is `async def`: their calls run on the worker's event loop.
        self.coroutine_queues = {
            name for name, spec in specs.items() if inspect.iscoroutinefunction(spec.handler)
        }
        self.event_loop = EventLoopThread()
        #: Whether job.step may record inside a transaction: set by testing.py when its
        #: drain() runs in a test's transaction, which holds every write.
        self.steps_in_transaction = False
        #: Told of each handler call's jobs before and after it: the --processes
        #: supervisor's pipe, so it can count a crash when a handler ends this process.
        self.notices = NoNotices()

    def close(self) -> None:
        """Stop the event loop of async handlers, if one started."""
        self.event_loop.stop()

    def call(self, spec: ConsumerSpec, handles: list[JobHandle], *args: Any) -> Any:
        """Call the handler about the jobs of `handles` with `args`, inside the consumer span
        when tracing (tracing.py); its duration goes to the stats whatever it does. A
        transaction it left open on its thread's connections is rolled back, and the call
        then raises TransactionLeftOpen (connections.py): the next job on this thread starts
        clean."""
        jobs = [handle.job for handle in handles]
        claims = [handle.claim for handle in handles]
        started = time.monotonic()
        before = self.connections.states()
        self.notices.started(claims)
        try:
            output = self._traced(spec, jobs, *args)
        except BaseException as error:
            self.connections.restore(before, error)
            raise
        finally:
            self.notices.ended(claims)
            self.stats.record_duration(spec.queue, time.monotonic() - started)
        self.connections.restore(before)
        return output

    def _traced(self, spec: ConsumerSpec, jobs: list[Job], *args: Any) -> Any:
        if tracing.ENABLED and tracing.active():
            private = _private_text if spec.queue in self.sensitive else None
            with tracing.process_span(spec.queue, jobs, spec.batch is not None, private):
                return self._invoke(spec, jobs, *args)
        return self._invoke(spec, jobs, *args)

    def _prepare(self) -> None:
        """Made ready to call a handler, before the job's time limit starts (the process
        pool's executor starts this thread's child here)."""

    def _invoke(self, spec: ConsumerSpec, jobs: list[Job], *args: Any) -> Any:
        """Call the handler; an `async def` one runs on the worker's event loop meanwhile.
        (The process pool's executor sends the call to a child instead: process_pool.py.)"""
        if spec.queue in self.coroutine_queues:
            return self.event_loop.run(spec.handler(*args))
        return spec.handler(*args)

    def claimed(self, handles: list[JobHandle]) -> None:
        """The jobs of one claim, held (InFlight.add_all) and not yet started: a plain
        consumer's share one read of their recorded steps, made when the first of them asks
        (step_records.py). A handler that never uses steps costs nothing more: each job's
        steps were made at its start before, now here, and none is read."""
        spec = self.specs[handles[0].job.queue]
        if spec.atomic or spec.batch is not None:
            return
        shared = ClaimStepsLoad(self.using, handles)
        in_transaction = self.steps_in_transaction
        for handle, run in zip(handles, self.inflight.runs_of(handles), strict=True):
            run.steps = ClaimedSteps(
                self.using, handle.claim, handle.queue.clock, in_transaction, shared
            )

    def run_unit(self, unit: list[JobHandle]) -> None:
        """Run one unit of work (worker/units.py): a batch consumer's jobs in one call, a
        plain consumer's job on its own."""
        if self.specs[unit[0].job.queue].batch is not None:
            self.run_batch(unit)
        else:
            for handle in unit:
                self.run(handle)

    def run_batch(self, handles: list[JobHandle]) -> None:
        """Call a batch consumer's handler once with the jobs of `handles` this worker still
        holds. It returns None: all are acked (grouped by the AckService, like any success). It
        returns a mapping of job id to exception: those jobs settle as if their own handler
        had raised it, the rest are acked. It raises: every job of the call settles with
        that exception. A KeyboardInterrupt lets them all go unsettled, as in `run`."""
        live = self.inflight.begin_all(handles)
        if not live:
            return
        spec = self.specs[live[0].job.queue]
        started = time.monotonic()
        self.connections.watch()
        if self.recycle_before:
            self.connections.recycle()
        self._prepare()
        jobs = [handle.job for handle in live]
        begun = live
        runs = self._start_all(spec, live, started)
        signals.announce_each(signals.job_started, Job, jobs)
        unsettled = live  # until the handler's outcome is known: let go if anything raises
        try:
            try:
                # The handler gets a list of its own: whatever it does to it, every job of
                # the call is still settled here.
                called = running_jobs(jobs, runs)
                failures = batch_failures(self.call(spec, live, called), jobs)
            except KeyboardInterrupt:
                raise
            except HANDLER_ERRORS as error:
                failures = dict.fromkeys([job.id for job in jobs], error)
            # Jobs the time limits settled meanwhile are done with: what came back is late.
            live = self._settle_all(live, runs, failures)
            if failures:
                unsettled = [handle for handle in live if handle.job.id in failures]
                acking = [handle for handle in live if handle.job.id not in failures]
            else:
                unsettled, acking = [], live
            # A batch handler returns failures, not outputs: one HistoryEntry for all its jobs.
            record_history_all(
                acking, history.entry_for(spec.queue, None, time.monotonic() - started)
            )
            self._to_ack(acking, started)
            self.inflight.handlers_done(unsettled, wake=False)  # settling, not running: _run_plain
            for handle in unsettled:
                self._settle_failure(spec, handle, failures[handle.job.id], started)
        finally:
            if unsettled:
                self.inflight.remove_all(unsettled)
            self._stopped(runs, begun)
            self.connections.recycle()

    def run(self, handle: JobHandle) -> None:
        """Run the job to an outcome. Never raises for the handler's sake, except a
        KeyboardInterrupt: then the job is let go unsettled, and its lease lapses into
        reclaim with the attempt counted (a handler that always interrupts still ends dead)."""
        if not self.inflight.begin(handle):
            return  # released by a shutdown before a thread got to it: never start it
        if self._cancelled_before_start(handle):
            return
        job = handle.job
        spec = self.specs[job.queue]
        started = time.monotonic()
        self.connections.watch()
        if self.recycle_before:
            self.connections.recycle()
        self._prepare()
        run = self._start(spec, handle, started)
        signals.announce(signals.job_started, Job, job=job)
        finished = False
        try:
            if spec.atomic:
                finished = self._run_atomic(spec, handle, run, started)
            else:
                finished = self._run_plain(spec, handle, run, started)
        finally:
            if not finished:
                self.inflight.remove(handle)
            self._stopped([run], [handle])
            self.connections.recycle()

    def _cancelled_before_start(self, handle: JobHandle) -> bool:
        """A job cancelled (or whose claim was lost) while it waited for a thread (--batch
        prefetch) is not started: it is gone, and its outcome would be refused."""
        run = self.inflight.run_of(handle)
        if not run.cancelled:
            return False
        self.inflight.remove(handle)
        self._report(handle, "cancelled", time.monotonic())
        self._stopped([run], [handle])
        return True

    def _start(self, spec: ConsumerSpec, handle: JobHandle, started: float) -> Run:
        """The job's Run, its deadline counting from now."""
        run = self.inflight.run_of(handle)
        run.start(handle.queue.clock, spec.timeout, started)
        if spec.atomic:
            run.steps = IN_ATOMIC
        elif not isinstance(run.steps, ClaimedSteps):  # not made at the claim (`claimed`)
            run.steps = ClaimedSteps(
                self.using, handle.claim, handle.queue.clock, self.steps_in_transaction
            )
        return run

    def _start_all(self, spec: ConsumerSpec, handles: list[JobHandle], started: float) -> list[Run]:
        """_start() for the jobs of one batch handler call: their Runs under one lock."""
        runs = self.inflight.runs_of(handles)
        start_all(runs, handles[0].queue.clock, spec.timeout, started)
        for run in runs:
            run.steps = IN_BATCH
        return runs

    def _settle_all(
        self,
        handles: list[JobHandle],
        runs: list[Run],
        failures: Mapping[int, BaseException] | None = None,
    ) -> list[JobHandle]:
        """_settles() for the jobs of one batch handler call: those it may still settle."""
        taken = settle_all(runs)
        if all(taken):
            return handles
        failed = failures or {}
        return [h for h, run, ok in zip(handles, runs, taken, strict=True)
                if ok or self._settles(h, run, failed.get(h.job.id))]  # fmt: skip

    def _settles(self, handle: JobHandle, run: Run, error: BaseException | None = None) -> bool:
        """Take the right to settle the job's attempt; False (logged) when the time limits
        settled it already: the handler came back after its limit, or its process-pool
        child was ended past it (`error`), and what it did is discarded."""
        if run.settle():
            return True
        job = handle.job
        if isinstance(error, WorkerChildDied):  # the pool ended the child: nothing returned
            logger.warning("%s job %s: %s past its time limit (%g s)", job.queue, job.id, error,
                           run.timeout or 0, extra=job_fields(job))  # fmt: skip
            return False
        logger.warning("%s job %s: the handler returned after its time limit (%g s); its "
                       "outcome is discarded", job.queue, job.id, run.timeout or 0,
                       extra=job_fields(job))  # fmt: skip
        return False

    def _stopped(self, runs: list[Run], handles: list[JobHandle]) -> None:
        """The handler of these jobs has stopped: the cancel requests of those cancelled
        while it ran go (the admin stops showing "cancel requested"), and those jobs are
        kept as "cancelled" when their queue keeps history. A refused heartbeat does not tell
        a cancel from a lost claim; the CancelRequest row does."""
        stopped = time.monotonic()
        flagged = {
            handle.job.id: (handle, run)
            for handle, run in zip(handles, runs, strict=True)
            if run.cancel_reason in (CANCELLED, CLAIM_LOST)
        }
        if not flagged:
            return
        try:
            cancelled = operations.clear_cancel_requests(self.using, list(flagged))
        except Exception as exc:  # the leader's sweep clears them later
            logger.warning("could not clear the cancel requests of jobs %s: %s",
                           list(flagged), exc)  # fmt: skip
            return
        for job_id in cancelled:
            handle, run = flagged[job_id]
            self._keep_cancelled(handle, stopped - run.started if run.started else None)

    def _keep_cancelled(self, handle: JobHandle, duration: float | None) -> None:
        """Write a job cancelled while it ran to the history, outcome "cancelled", when its
        queue keeps (history.py); its live row is gone already."""
        done = history.entry_for(handle.job.queue, None, duration)
        if done is None:
            return
        job = handle.job
        try:
            operations.keep_cancelled(self.using, job, handle.queue.clock(), done=done)
        except Exception as exc:  # the job is gone either way; only its history row is lost
            logger.warning("%s job %s: could not keep it as cancelled: %s", job.queue, job.id,
                           exc, extra=job_fields(job))  # fmt: skip

    def settle_overrun(self, handle: JobHandle, run: Run) -> None:
        """The time limits' verdict on a job whose handler passed its timeout (and still
        runs): the attempt fails with TimeLimitExceeded through the retry policy, and the
        job leaves this worker's jobs in flight, freeing its slot."""
        spec = self.specs[handle.job.queue]
        try:
            self._settle_failure(spec, handle, TimeLimitExceeded(run.timeout or 0), run.started)
        finally:
            self.inflight.remove(handle)

    def _run_plain(self, spec: ConsumerSpec, handle: JobHandle, run: Run, started: float) -> bool:
        try:
            output = self.call(spec, [handle], handle.job.payload, running_job(handle.job, run))
        except KeyboardInterrupt:
            raise
        except HANDLER_ERRORS as error:
            # The handler has stopped: the job is settling, not running, so a heartbeat that
            # finds its claim gone (this thread's own retry, snooze or dead letter) does not
            # take it for a lost claim. Its lease is still extended until it is let go.
            self.inflight.handlers_done([handle], wake=False)
            if self._settles(handle, run, error):
                self._settle_failure(spec, handle, error, started)
            return False
        if not self._settles(handle, run):
            return False
        handle.record(output, time.monotonic() - started)
        if run.steps.any:  # its steps go with its ack (docs/durable-steps.md)
            handle.with_steps = True
        self._to_ack([handle], started)
        return True

    def _to_ack(self, handles: list[JobHandle], started: float) -> None:
        """The handlers of `handles` returned: their acks are pending, their threads free.
        The claimer is woken now, unless the acker acks them at once because a claim waits
        for their capped queue's slots: then the ack's commit wakes it (InFlight.remove_all),
        and a claim before it would find the slots still held, and keep the queue's gate
        from the claim that can use them."""
        at_once = self.acker.submit_all(handles, started)
        self.inflight.handlers_done(handles, wake=not at_once)

    def _run_atomic(self, spec: ConsumerSpec, handle: JobHandle, run: Run, started: float) -> bool:
        job = handle.job
        self.inflight.hold_in_transaction(handle)
        run.settle()  # the time limits never settle a job whose row a transaction holds
        try:
            with transaction.atomic(using=self.using):
                if not operations.lock_claim(self.using, handle.claim, handle.queue.clock()):
                    raise LostClaim
                output = self.call(spec, [handle], job.payload, running_job(job, run))
                if run.timed_out:  # past its limit: all it did rolls back
                    raise TimeLimitExceeded(run.timeout or 0)
                handle.record(output, time.monotonic() - started)
                acked = operations.ack(
                    self.using, [handle.claim], handle.queue.clock(), [handle.history_entry()]
                )
                if handle.claim not in acked:
                    raise LostClaim
        except LostClaim:
            self._report(handle, "lost", started)
            return False
        except KeyboardInterrupt:
            raise
        except HANDLER_ERRORS as error:
            self._settle_failure(spec, handle, error, started)
            return False
        handle.settled_by_worker()
        self._report(handle, "succeeded", started)
        signals.announce(signals.job_succeeded, Job, job=job)
        return False

    def _settle_failure(
        self, spec: ConsumerSpec, handle: JobHandle, error: BaseException, started: float
    ) -> None:
        job = handle.job
        if isinstance(error, Cancelled):
            # Gone already when cancelled from outside (kept by `_stopped`); a handler's own
            # Cancelled removes it, fenced by its claim, and keeps it as "cancelled".
            if handle.remove():
                self._keep_cancelled(handle, time.monotonic() - started)
            self._report(handle, "cancelled", started)
            return
        if isinstance(error, Snooze):
            done = handle.snooze(error.delay)
            self._report(handle, "snoozed" if done else "lost", started)
            return
        if isinstance(error, Sleeping | Waiting):  # job.sleep, job.wait_for: never a failure
            if isinstance(error, Sleeping):
                done = handle.sleep(error.until)
            else:
                done = handle.wait(error.name, error.deadline)
            self._report(handle, "snoozed" if done else "lost", started)
            return
        text = error_text(error, job.queue in self.sensitive)
        line = logged_line(text)  # the job's log line carries the error's headline
        if isinstance(error, Fail):
            done = handle.fail(error.reason)
            self._report(handle, "dead" if done else "lost", started, line)
            return
        if isinstance(error, Retry):
            delay = _retry_delay(error, handle)
        elif not spec.retry.retries(error):
            done = handle.fail(text)
            self._report(handle, "dead" if done else "lost", started, line)
            return
        else:
            delay = None
        if delay is None:
            delay = spec.retry.delay(job.attempts, job.backoff_base)
        out_of_attempts = job.attempts >= job.max_attempts
        done = handle.retry(text, delay=timedelta(seconds=delay))
        if not done:
            self._report(handle, "lost", started)
        elif out_of_attempts:
            self._report(handle, "dead", started, line)
        else:
            self._report(handle, "retried", started, line)
            signals.announce(signals.job_retried, Job, job=job)

    def _report(
        self, handle: JobHandle, outcome: str, started: float, error: str | None = None
    ) -> None:
        report_outcome(self.stats, handle.job, outcome, started, error)
