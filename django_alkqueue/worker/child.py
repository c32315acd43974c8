"""A process-pool child: runs the handler calls its worker sends, one at a time, and sends
back each outcome (docs/running-jobs.md, process_pool.py for the worker's side).

Three threads: the main one runs handlers; a reader takes the worker's messages off the
pipe, so that a cancel reaches the running handler's `job.cancelled` at once; a sender
passes progress reports up (ProgressSender). The worker gone (the
pipe at its end), the child exits at once: its job's lease is no longer extended, and its
outcome would be refused. SIGTERM (a time limit, an unanswered cancel, shutdown) unwinds the
running handler (its `finally` blocks run, an atomic consumer's transaction rolls back),
then the child dies of that SIGTERM. SIGINT is the worker's business: a child ignores it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from contextlib import suppress
from datetime import datetime
from multiprocessing.connection import Connection
from types import FrameType
from typing import Any

import django
from django.apps import apps
from django.db import connections, transaction

from .. import history, operations
from ..clock import system_clock
from ..consumers import ConsumerSpec
from ..exceptions import TimeLimitExceeded
from ..privacy import is_sensitive
from ..running import Run, running_jobs
from ..steps import IN_ATOMIC, IN_BATCH
from .connections import ThreadConnections, recycle_connections, watch_connections
from .event_loop import contained
from .executor import error_text
from .served import resolve_specs
from .step_records import ClaimedSteps
from .wire import Outcome, Work, portable_value, raised


class Terminated(BaseException):
    """SIGTERM reached the child: unwind the handler, then die of that signal."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def main(conn: Connection, using: str) -> None:
    """The child's life (the target of its Process): set up, then serve until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    _set_up_django()
    child = Child(conn, using)
    child.send(("ready",))
    try:
        child.serve()
    except Terminated:
        child.close()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    child.close()


def _set_up_django() -> None:
    """Django is set up in the fork server already (forkserver_setup.py); this covers a
    server whose set-up failed, so that the error shows here, in the child."""
    if not apps.ready:
        django.setup()


class ChildRun(Run):
    """A Run whose progress reports also go up the pipe (through ProgressSender), for the
    worker's heartbeat service to write them with its heartbeats."""

    __slots__ = ("_job_id", "_sender")

    def __init__(self, job_id: int, sender: ProgressSender) -> None:
        super().__init__()
        self._job_id = job_id
        self._sender = sender

    def report(self, done: float, total: float | None, note: str, now: datetime) -> None:
        super().report(done, total, note, now)
        self._sender.report(self._job_id, ("progress", self._job_id, done, total, note, now))


#: Seconds between two progress messages up the pipe: the worker writes a job's progress
#: once a second at most, so a handler reporting every row need not cost a message a row.
SEND_PROGRESS_EVERY = 0.1


class ProgressSender:
    """Sends the latest progress report of each job, at most every SEND_PROGRESS_EVERY
    seconds, from a thread of its own; a report costs the handler a dict write."""

    def __init__(self, send: Callable[[tuple[Any, ...]], None]) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._latest: dict[int, tuple[Any, ...]] = {}
        self._reported = threading.Event()
        threading.Thread(target=self._run, name="alk-child-progress", daemon=True).start()

    def report(self, job_id: int, message: tuple[Any, ...]) -> None:
        with self._lock:
            self._latest[job_id] = message
        self._reported.set()

    def _run(self) -> None:
        while self._reported.wait():
            self._reported.clear()
            with self._lock:
                messages, self._latest = list(self._latest.values()), {}
            for message in messages:
                with suppress(OSError):  # the worker is gone: the reader ends this child
                    self._send(message)
            time.sleep(SEND_PROGRESS_EVERY)


class Child:
    def __init__(self, conn: Connection, using: str) -> None:
        self.conn = conn
        self.using = using
        self._send_lock = threading.Lock()
        self._work: queue.SimpleQueue[tuple[int, Work] | None] = queue.SimpleQueue()
        #: The running call's number (the worker's and this child's count of "run"
        #: messages agree) and its jobs' Runs, by job id: where a cancel goes.
        self._call_number = 0
        self._runs: dict[int, Run] = {}
        #: Cancels heard, by (call number, job id): one that arrives before its call starts
        #: is applied when it does; one that arrives after its call ended never applies.
        self._cancels: dict[tuple[int, int], str] = {}
        self._cancel_lock = threading.Lock()
        self._specs: dict[str, ConsumerSpec] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._progress = ProgressSender(self.send)
        self._connections = ThreadConnections(watch=False)  # its states, in the calling thread
        threading.Thread(target=self._read, name="alk-child-reader", daemon=True).start()

    def send(self, message: tuple[Any, ...]) -> None:
        with self._send_lock:
            self.conn.send(message)

    def serve(self) -> None:
        while (call := self._work.get()) is not None:
            self.send(("outcome", self.run(*call)))

    def close(self) -> None:
        if self._loop is not None:
            with suppress(Exception):
                self._loop.close()
        with suppress(Exception):  # a broken connection is closed all the same
            connections.close_all()

    def _read(self) -> None:
        """The worker's messages: work to run, a job's cancel, the stop."""
        calls = 0
        while True:
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                os._exit(1)  # the worker is gone: its jobs are no longer ours
            if message[0] == "cancel":
                self._cancel(*message[1:])
            elif message[0] == "run":
                calls += 1
                self._work.put((calls, message[1]))
            else:
                self._work.put(None)

    # -- one handler call --------------------------------------------------------------------

    def _cancel(self, call: int, job_id: int, reason: str) -> None:
        with self._cancel_lock:
            self._cancels[call, job_id] = reason
            run = self._runs.get(job_id) if call == self._call_number else None
        if run is not None:
            run.cancel(reason)

    def _begin(self, call: int, runs: dict[int, Run]) -> None:
        """The call's Runs, with the cancels that came first."""
        with self._cancel_lock:
            self._call_number, self._runs = call, runs
            early = {job_id: self._cancels.get((call, job_id)) for job_id in runs}
        for job_id, reason in early.items():
            if reason is not None:
                runs[job_id].cancel(reason)

    def _end(self, call: int) -> None:
        with self._cancel_lock:
            self._runs = {}
            self._cancels = {key: r for key, r in self._cancels.items() if key[0] > call}

    def run(self, call: int, work: Work) -> Outcome:
        watch_connections()
        runs = [self._run(job.id, work) for job in work.jobs]
        self._begin(call, {job.id: run for job, run in zip(work.jobs, runs, strict=True)})
        jobs = running_jobs(work.jobs, runs)
        started = time.monotonic()
        try:
            spec = self._spec(work.queue)
            if work.claim is not None:
                value = self._atomic(spec, work, jobs[0])
            elif spec.batch is not None:
                value = _portable_failures(self._call(spec, jobs), is_sensitive(work.queue))
            else:
                value = self._call(spec, work.jobs[0].payload, jobs[0])
            return Outcome("returned", portable_value(value), duration=time.monotonic() - started,
                           with_steps=runs[0].steps.any)  # fmt: skip
        except Terminated:
            raise
        except LostClaimInChild:
            return Outcome("lost", duration=time.monotonic() - started)
        except BaseException as error:  # whatever the handler raised: see executor.py
            text = error_text(error, is_sensitive(work.queue))
            return Outcome("raised", error=raised(error, text), duration=time.monotonic() - started)
        finally:
            self._end(call)
            recycle_connections()

    def _run(self, job_id: int, work: Work) -> Run:
        run = ChildRun(job_id, self._progress)
        run.timeout = work.timeout
        run.deadline = work.deadline
        run.started = time.monotonic()
        if work.claim is not None:
            run.steps = IN_ATOMIC
        elif work.steps_claim is not None:
            run.steps = ClaimedSteps(self.using, work.steps_claim, system_clock)
        else:
            run.steps = IN_BATCH
        return run

    def _spec(self, name: str) -> ConsumerSpec:
        if name not in self._specs:
            self._specs[name] = resolve_specs((name,))[0]
        return self._specs[name]

    def _call(self, spec: ConsumerSpec, *args: Any) -> Any:
        """Call the handler; an `async def` one runs on this child's event loop. A
        transaction it left open is rolled back, as in the thread pool (Executor.call)."""
        before = self._connections.states()
        try:
            value = self._invoke(spec, *args)
        except Terminated:
            raise
        except BaseException as error:
            self._connections.restore(before, error)
            raise
        self._connections.restore(before)
        return value

    def _invoke(self, spec: ConsumerSpec, *args: Any) -> Any:
        if inspect.iscoroutinefunction(spec.handler):
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
            return run_to_end(self._loop, spec.handler(*args))
        return spec.handler(*args)

    def _atomic(self, spec: ConsumerSpec, work: Work, job: Any) -> Any:
        """An atomic consumer: lock the claim, run the handler and ack in one transaction of
        this child's connection, as the thread pool does in its handler thread."""
        assert work.claim is not None
        started = time.monotonic()
        with transaction.atomic(using=self.using):
            if not operations.lock_claim(self.using, work.claim, system_clock()):
                raise LostClaimInChild
            value = self._call(spec, job.payload, job)
            if work.deadline is not None and system_clock() >= work.deadline:
                raise TimeLimitExceeded(work.timeout or 0)  # all it did rolls back
            done = history.entry_for(work.queue, value, time.monotonic() - started)
            acked = operations.ack(self.using, [work.claim], system_clock(), [done])
            if work.claim not in acked:
                raise LostClaimInChild
        return None  # the output is in the history already: nothing more to send


def run_to_end(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run `coroutine` on `loop` to its end, as the thread pool's event loop does
    (event_loop.py): a handler that stops the loop, or a callback that raises out of it,
    costs the loop a restart, not the attempt."""
    task = loop.create_task(contained(coroutine))
    while not task.done():
        try:
            loop.run_until_complete(task)
        except Terminated:
            raise
        except BaseException:  # the loop stopped early: run it again
            continue
    returned, value = task.result()
    if returned:
        return value
    raise value


class LostClaimInChild(Exception):
    """An atomic consumer's claim was gone before the commit: roll everything back."""


def _portable_failures(result: object, sensitive: bool) -> object:
    """A batch handler's failures, each exception ready to cross; anything else as it is
    (the worker refuses it as it would in the thread pool)."""
    if not isinstance(result, Mapping):
        return result
    if not all(isinstance(error, BaseException) for error in result.values()):
        return result
    return {job_id: raised(error, error_text(error, sensitive)) for job_id, error in result.items()}
