"""Run one claimed job: call its handler, then turn the outcome into ack, retry or fail.

- the handler returns            -> ack (grouped with other acks by the Acker)
- it raises Retry(delay)         -> retry after delay, or the policy's curve
- it raises Snooze(delay)        -> pending again after delay, the attempt refunded
- it raises Fail(reason)         -> dead letter now
- an exception outside retry_on  -> dead letter now
- any other exception            -> retry on the policy's curve; dead letter when out of attempts
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

from .. import operations, signals, validation
from ..consumers import ConsumerSpec
from ..error_text import headline, private_error_text
from ..exceptions import InvalidOption
from ..jobs import Job
from ..outcomes import Fail, Retry, Snooze
from ..privacy import is_sensitive
from ..queues import JobHandle
from .acker import Acker
from .connections import ThreadConnections, ages_connections
from .event_loop import EventLoopThread
from .inflight import InFlight
from .report import job_fields, report_outcome
from .stats import WorkerStats

logger = logging.getLogger("django_alkqueue")


# What a handler may raise and still leave the worker whole: anything. A BaseException that
# is not an Exception is still a failure of that job, not of the worker: SystemExit (a
# library calling sys.exit), asyncio.CancelledError (a handler running a coroutine that
# was cancelled), GeneratorExit, a project's own BaseException subclass. Letting one through
# would kill the handler thread with the job still claimed and its lease renewed for ever.
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
    message is withheld (`private_error_text`)."""
    if sensitive:
        return private_error_text(error)
    return headline(error) + "\n\n" + "".join(traceback.format_exception(error)).rstrip()


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
            raise TypeError(f"a batch handler returned a failure for job {job_id!r}, "
                            "which is not in its call")  # fmt: skip
        if not isinstance(error, BaseException):
            raise TypeError(f"a batch handler returned {error!r} for job {job_id}, "
                            "not an exception")  # fmt: skip
    return dict(result)


class Executor:
    def __init__(
        self,
        specs: dict[str, ConsumerSpec],
        acker: Acker,
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
        self.connections = ThreadConnections()
        #: Queues whose handler is `async def`: their calls run on the worker's event loop.
        self.coroutine_queues = {
            name for name, spec in specs.items() if inspect.iscoroutinefunction(spec.handler)
        }
        self.event_loop = EventLoopThread()

    def close(self) -> None:
        """Stop the event loop of async handlers, if one started."""
        self.event_loop.stop()

    def call(self, spec: ConsumerSpec, *args: Any) -> Any:
        """Call the handler; an `async def` one runs on the worker's event loop meanwhile."""
        if spec.queue in self.coroutine_queues:
            return self.event_loop.run(spec.handler(*args))
        return spec.handler(*args)

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
        holds. It returns None: all are acked (grouped by the Acker, like any success). It
        returns a mapping of job id to exception: those jobs settle as if their own handler
        had raised it, the rest are acked. It raises: every job of the call settles with
        that exception. A KeyboardInterrupt lets them all go unsettled, as in `run`."""
        live = self.inflight.begin_all(handles)
        if not live:
            return
        spec = self.specs[live[0].job.queue]
        started = time.monotonic()
        if self.recycle_before:
            self.connections.recycle()
        jobs = [handle.job for handle in live]
        for job in jobs:
            signals.announce(signals.job_started, Job, job=job)
        unsettled = live  # until the handler's outcome is known: let go if anything raises
        try:
            try:
                # The handler gets a list of its own: whatever it does to it, every job of
                # the call is still settled here.
                failures = batch_failures(self.call(spec, list(jobs)), jobs)
            except KeyboardInterrupt:
                raise
            except HANDLER_ERRORS as error:
                failures = dict.fromkeys([job.id for job in jobs], error)
            if failures:
                unsettled = [handle for handle in live if handle.job.id in failures]
                acking = [handle for handle in live if handle.job.id not in failures]
            else:
                unsettled, acking = [], live
            self.inflight.handlers_done(acking)
            self.acker.submit_all(acking, started)
            for handle in unsettled:
                self._settle_failure(spec, handle, failures[handle.job.id], started)
        finally:
            if unsettled:
                self.inflight.remove_all(unsettled)
            self.connections.recycle()

    def run(self, handle: JobHandle) -> None:
        """Run the job to an outcome. Never raises for the handler's sake, except a
        KeyboardInterrupt: then the job is let go unsettled, and its lease lapses into
        reclaim with the attempt counted (a handler that always interrupts still ends dead)."""
        if not self.inflight.begin(handle):
            return  # released by a shutdown before a thread got to it: never start it
        job = handle.job
        spec = self.specs[job.queue]
        started = time.monotonic()
        if self.recycle_before:
            self.connections.recycle()
        signals.announce(signals.job_started, Job, job=job)
        finished = False
        try:
            if spec.atomic:
                finished = self._run_atomic(spec, handle, started)
            else:
                finished = self._run_plain(spec, handle, started)
        finally:
            if not finished:
                self.inflight.remove(handle)
            self.connections.recycle()

    def _run_plain(self, spec: ConsumerSpec, handle: JobHandle, started: float) -> bool:
        try:
            self.call(spec, handle.job.payload, handle.job)
        except KeyboardInterrupt:
            raise
        except HANDLER_ERRORS as error:
            self._settle_failure(spec, handle, error, started)
            return False
        self.inflight.handler_done(handle)
        self.acker.submit(handle, started)
        return True

    def _run_atomic(self, spec: ConsumerSpec, handle: JobHandle, started: float) -> bool:
        job = handle.job
        self.inflight.hold_in_transaction(handle)
        try:
            with transaction.atomic(using=self.using):
                if not operations.lock_claim(self.using, handle.claim, handle.queue.clock()):
                    raise LostClaim
                spec.handler(job.payload, job)
                acked = operations.ack(self.using, [handle.claim], handle.queue.clock())
                if handle.claim not in acked:
                    raise LostClaim
        except LostClaim:
            handle._finish(False)
            self._report(handle, "lost", started)
            return False
        except KeyboardInterrupt:
            raise
        except HANDLER_ERRORS as error:
            self._settle_failure(spec, handle, error, started)
            return False
        handle._finish(True)
        self._report(handle, "succeeded", started)
        signals.announce(signals.job_succeeded, Job, job=job)
        return False

    def _settle_failure(
        self, spec: ConsumerSpec, handle: JobHandle, error: BaseException, started: float
    ) -> None:
        job = handle.job
        if isinstance(error, Snooze):
            done = handle.snooze(error.delay)
            self._report(handle, "snoozed" if done else "lost", started)
            return
        if isinstance(error, Fail):
            done = handle.fail(error.reason)
            self._report(handle, "dead" if done else "lost", started)
            return
        text = error_text(error, job.queue in self.sensitive)
        if isinstance(error, Retry):
            delay = _retry_delay(error, handle)
        elif not spec.retry.retries(error):
            done = handle.fail(text)
            self._report(handle, "dead" if done else "lost", started)
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
            self._report(handle, "dead", started)
        else:
            self._report(handle, "retried", started)
            signals.announce(signals.job_retried, Job, job=job)

    def _report(self, handle: JobHandle, outcome: str, started: float) -> None:
        report_outcome(self.stats, handle.job, outcome, started)
