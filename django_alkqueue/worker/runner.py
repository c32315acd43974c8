"""One worker process, start to finish. `Worker._build` makes the parts from one reading of
the settings; `Worker._run` starts and stops them in one plain sequence. Each part is a small
object with its own tests, and every loop is a service run by service.Loop."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.models import Count

from .. import defaults, operations
from ..clock import Clock, system_clock
from ..conf import AlkQueueSettings, get_settings
from ..consumers import ConsumerSpec
from ..limits import REFRESH_EVERY
from ..models import QueueMessage
from ..periodic import PeriodicService
from ..queues import JobHandle, queue
from ..reports.worker_report import StatusReportService, Stream, report_shutdown
from ..reports.worker_stats import WorkerStats
from ..running import CANCELLED
from ..sql import dialect_for, follow_up_delay
from .acker import AckService
from .claim_ahead import ClaimAhead, ahead_of
from .claimer import Claimer, ClaimService, PausedQueues
from .connections import ThreadConnections
from .consumer_table import sync_consumers
from .executor import Executor
from .exits import EXIT_AT_ONCE, EXIT_SOFTWARE, EXIT_STUCK
from .flow_state import FlowState
from .heartbeats import HeartbeatService
from .history_sweeper import HistoryService
from .inflight import InFlight
from .job_notices import JobNotices
from .leader import Leadership
from .listener import ListenService
from .maintenance import LeaderService, ReclaimService, SweepService, WaitReleaseService
from .pool import ThreadPool
from .presence import PresenceService
from .process_pool import Children, ProcessExecutor, ProcessPool
from .queue_stats import QueueStatCountService, QueueStatDeltaService
from .served import resolve_specs
from .service import Loop, Service
from .signal_relay import SignalRelay
from .time_limits import TimeLimitService
from .units import Dispatch, jobs_per_call, worker_capacity
from .vacuumer import VacuumService

logger = logging.getLogger("django_alkqueue")

#: The signals that stop a worker: the first one gracefully, a second one at once.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: The supervisor's stop request to its children (see supervisor.py): always graceful, and
#: never counted as a first or second signal, so a child that systemd signals directly as
#: well (KillMode=control-group signals every process) still shuts down gracefully.
SUPERVISOR_STOP = signal.SIGUSR1


@dataclasses.dataclass(frozen=True)
class WorkerOptions:
    queues: tuple[str, ...] = ()
    concurrency: int = defaults.WORKER_CONCURRENCY
    batch: int | None = None
    poll_interval: float = defaults.WORKER_POLL_INTERVAL
    shutdown_timeout: float = defaults.WORKER_SHUTDOWN_TIMEOUT
    worker_id: str | None = None
    burst: bool = False
    max_jobs: int | None = None
    takeover: bool = False
    using: str | None = None
    #: A file touched on every heartbeat, for liveness probes that read its age.
    health_file: str | None = None
    #: Handler threads stuck past their time limit tolerated before the worker recycles.
    max_stuck: int = defaults.WORKER_MAX_STUCK
    #: Where handlers run: "thread" or "process" (docs/running-jobs.md).
    pool: str = defaults.WORKER_POOL
    #: Process pool: seconds between SIGTERM and SIGKILL, and a cancel's wait for a return.
    kill_grace: float = defaults.WORKER_KILL_GRACE
    #: Process pool: handler calls a child runs before it is replaced; None: no limit.
    max_jobs_per_child: int | None = None
    #: Under the --processes supervisor: the pipe on which the thread pool tells it which
    #: jobs its handlers run (job_notices.py).
    notices_fd: int | None = None


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclasses.dataclass(frozen=True)
class Parts:
    """Everything one worker process runs, built by `Worker._build`."""

    inflight: InFlight
    stats: WorkerStats
    executor: Executor
    pool: ThreadPool
    acker: AckService
    presence: PresenceService
    stat_deltas: QueueStatDeltaService
    reporter: StatusReportService
    listener: ListenService | None
    #: The main thread's loop: claim and dispatch.
    claim: Loop
    #: The acker's loop, stopped before the others: the last acks come before the release.
    acking: Loop
    #: The background loops, each in its own thread, the acker's included.
    loops: list[Loop]


class Worker:
    def __init__(
        self, options: WorkerOptions, stdout: Stream = sys.stdout, clock: Clock = system_clock
    ) -> None:
        self.options = options
        self.stdout = stdout
        self.clock = clock
        self.using = options.using or get_settings().DATABASE
        self.worker_id = options.worker_id or default_worker_id()
        self.stop_claiming = threading.Event()  # first signal: finish what you hold
        self.wake = threading.Event()
        #: The name of the first loop that died, if one did: the worker then exits 70.
        self.died: str | None = None
        #: Set when too many handler threads were stuck: the worker then exits 75.
        self.recycled = False
        self._signals = 0

    # -- the sequence ----------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped; returns the exit status: 0, or EXIT_SOFTWARE after a loop died."""
        # Signals first: a stop requested during start-up still ends in a clean shutdown.
        relay = self._relay_signals()
        try:
            return self._run()
        finally:
            if relay is not None:
                relay.close()

    def _run(self) -> int:
        specs = resolve_specs(self.options.queues)
        names = [spec.queue for spec in specs]
        sync_consumers(specs, self.using, self.options.takeover, self.clock())
        parts = self._build(specs, get_settings())
        parts.presence.register(self.clock())
        parts.pool.start()
        for loop in parts.loops:
            loop.start()
        logger.info("worker %s serving %s with %d %s", self.worker_id, ", ".join(names),
                    self.options.concurrency,
                    "processes" if self.options.pool == "process" else "threads")  # fmt: skip

        parts.claim.run()  # until a signal, the end of a burst, or a loop's death

        # Jobs no thread has started (prefetched with --batch) go back now: running them
        # would only delay the exit, and they are released anyway.
        released = _release(parts.inflight, parts.pool.stop())
        if self.died is None:  # a broken worker does not wait on handlers it cannot serve
            self._drain(parts.inflight, self.options.shutdown_timeout)
        _stop([parts.acking])
        _flush_acks(parts.acker)  # the acks of jobs that finished in time
        if self.died is not None:  # the jobs running now may be what broke it
            _crash(parts.inflight, self.using, self.clock)
        released += _release(parts.inflight, parts.inflight.all())
        if released:
            logger.warning("released %d unfinished jobs back to pending", released)
        # Loops end; the leader's thread closes its connection, which drops the advisory lock.
        _stop(parts.loops)
        if parts.listener is not None:
            parts.listener.close()
        parts.pool.join(0.5)
        parts.executor.close()
        _quietly(lambda: parts.stat_deltas.run_once(self.clock()))  # finished since the last
        _quietly(parts.presence.unregister)
        parts.reporter.finish()
        report_shutdown(parts.stats, _final_depths(self.using, names), self.stdout,
                        self.options.burst, self.worker_id)  # fmt: skip
        return self._exit_status()

    def _build(self, specs: list[ConsumerSpec], settings: AlkQueueSettings) -> Parts:
        """The parts of this worker, wired together, from one reading of the settings."""
        using, clock, options = self.using, self.clock, self.options
        queues = [queue(spec.queue, using=using, clock=clock) for spec in specs]
        names = [q.name for q in queues]
        stats = WorkerStats()
        inflight = InFlight(changed=self.wake)
        # The limits in force are read again once per poll interval at least, so that a
        # change (set_limits, the admin's "Set limits") applies within one.
        flow = FlowState(every=min(REFRESH_EVERY, options.poll_interval))
        acker = AckService(using, inflight, stats, settings.ACK_WINDOW, flow)
        executor, pool = _executor_and_pool(options, specs, acker, inflight, stats, using)
        capacity = worker_capacity(options.concurrency, options.batch, specs)
        dispatch = Dispatch(executor.specs, pool.submit, executor.claimed)
        claimer = Claimer(
            queues, self.worker_id, inflight, dispatch, capacity,
            options.batch, PausedQueues(using, names, options.poll_interval), options.max_jobs,
            poll_interval=options.poll_interval, follow_up=follow_up_delay(settings.NOTIFY_WINDOW),
            ahead=ahead_of(ClaimAhead(options.concurrency, jobs_per_call(specs),
                                      min(q.lease for q in queues)), stats.handler_totals),
            flow=flow,
        )  # fmt: skip
        heartbeat = settings.WORKER_HEARTBEAT_INTERVAL
        presence = PresenceService(using, self.worker_id, names, options.concurrency, stats,
                                   heartbeat, options.health_file)  # fmt: skip
        stat_deltas = QueueStatDeltaService(using, stats, heartbeat)
        # The advisory lock lives on a session: behind a transaction-mode pooler that is the
        # direct LISTEN_DATABASE connection, never a pooled one.
        direct = settings.LISTEN_DATABASE or using
        leader_services: list[Service] = [
            ReclaimService(using), WaitReleaseService(using), SweepService(using),
            QueueStatCountService(using), VacuumService(using), HistoryService(using),
        ]  # fmt: skip
        if settings.PERIODIC:
            leader_services.append(PeriodicService(using, clock))
        leader = LeaderService(Leadership(direct, self.worker_id), leader_services,
                              settings.WORKER_STALE_AFTER)  # fmt: skip
        # PostgreSQL's LISTEN also carries cancels; elsewhere a socket hears this host's
        # enqueues (sql/local_wakeups.py) and a cancel comes with the next heartbeat.
        cancels = None
        if dialect_for(connections[direct]).supports_notify:
            cancels = (self.worker_id, lambda job_id: inflight.cancel(job_id, CANCELLED))
        listener = ListenService(direct, set(names), self.wake, claimer.notified, cancels)
        # With --burst too: a long drain reports as it goes, and ends with the table.
        reporter = StatusReportService(
            stats, inflight.count, lambda: _depth(using, names), self.stdout
        )
        heartbeat_service = HeartbeatService(inflight, using)

        def loop(service: Service, **kwargs: Any) -> Loop:
            return Loop(service, clock, self._loop_died, **kwargs)

        acking = loop(acker, wake=acker.submitted, refresh=ThreadConnections(watch=False).recycle)
        loops = [acking, loop(heartbeat_service, wake=inflight.reported), loop(presence),
                 loop(leader, refresh=None), loop(stat_deltas), loop(reporter)]  # fmt: skip
        loops.append(loop(listener))
        if any(spec.timeout is not None for spec in specs):
            limits = TimeLimitService(inflight, pool, executor.settle_overrun, self._recycle,
                                      options.max_stuck)  # fmt: skip
            loops.append(loop(limits, refresh=ThreadConnections(watch=False).recycle))
        claim = ClaimService(claimer, acker.pending, options.burst, self.stop_claiming)
        return Parts(
            inflight=inflight, stats=stats, executor=executor, pool=pool, acker=acker,
            presence=presence,
            stat_deltas=stat_deltas, reporter=reporter, listener=listener,
            claim=loop(claim, stop=self.stop_claiming, wake=self.wake,
                       refresh=ThreadConnections(watch=False).recycle), acking=acking,
            loops=loops,
        )  # fmt: skip

    # -- the steps -------------------------------------------------------------------------

    def _drain(self, inflight: InFlight, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while (
            inflight.count()
            and time.monotonic() < deadline
            and self._signals < 2
            and self.died is None
        ):
            inflight.changed.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            inflight.changed.clear()

    def _relay_signals(self) -> SignalRelay | None:
        """Catch SIGTERM, SIGINT and the supervisor's SIGUSR1 (main thread only); they are
        handled on the relay's thread (signal_relay.py)."""
        if threading.current_thread() is not threading.main_thread():
            return None
        relay = SignalRelay(self._on_signal)
        relay.install([*STOP_SIGNALS, SUPERVISOR_STOP])
        return relay

    def _on_signal(self, signum: int) -> None:
        if signum != SUPERVISOR_STOP:
            self._signals += 1
        if self._signals > 1:
            # Second signal, however soon after the first: leave now; the leases lapse and
            # reclaim returns the jobs.
            os._exit(EXIT_AT_ONCE)
        self._stop_gracefully(signum)

    def _exit_status(self) -> int:
        if self.died is None:
            if self.recycled:
                logger.error("stopped with handler threads stuck past their time limit; "
                             "exit status %d", EXIT_STUCK)  # fmt: skip
                return EXIT_STUCK
            return 0
        logger.error("stopped because the %s loop died; exit status %d", self.died, EXIT_SOFTWARE)
        return EXIT_SOFTWARE

    def _recycle(self, stuck: int) -> None:
        """Too many handler threads are stuck (time_limits.py): finish the other jobs,
        release what is held, and exit with EXIT_STUCK for a fresh process."""
        self.recycled = True
        self.stop_claiming.set()
        self.wake.set()

    def _loop_died(self, name: str) -> None:
        """A loop's last word (worker/service.py): stop claiming and shut down."""
        if self.died is None:
            self.died = name
        self.stop_claiming.set()
        self.wake.set()

    def _stop_gracefully(self, signum: int) -> None:
        if not self.stop_claiming.is_set():
            logger.info("signal %d: finishing in-flight jobs, claiming no more", signum)
        self.stop_claiming.set()
        self.wake.set()


def _executor_and_pool(
    options: WorkerOptions,
    specs: list[ConsumerSpec],
    acker: AckService,
    inflight: InFlight,
    stats: WorkerStats,
    using: str,
) -> tuple[Executor, ThreadPool]:
    """Where the handlers run: threads, or children of a process pool (process_pool.py)."""
    by_queue = {s.queue: s for s in specs}
    if options.pool == "process":
        children = Children(using, options.kill_grace, options.max_jobs_per_child)
        executor: Executor = ProcessExecutor(by_queue, acker, inflight, stats, using,
                                             children=children)  # fmt: skip
        return executor, ProcessPool(options.concurrency, executor.run_unit, children)
    executor = Executor(by_queue, acker, inflight, stats, using)
    if options.notices_fd is not None:
        executor.notices = JobNotices(options.notices_fd)
    return executor, ThreadPool(options.concurrency, executor.run_unit)


def _depth(using: str, names: list[str]) -> int:
    return QueueMessage.objects.using(using).filter(queue__in=names).count()


def _depths(using: str, names: list[str]) -> dict[str, int]:
    rows = (
        QueueMessage.objects.using(using)
        .filter(queue__in=names)
        .values_list("queue")
        .annotate(n=Count("id"))
    )
    return {name: 0 for name in names} | dict(rows)


def _final_depths(using: str, names: list[str]) -> dict[str, int]:
    """The queues' depths for the shutdown summary; none when the database is gone (the
    summary still tells what the worker did)."""
    try:
        return _depths(using, names)
    except Exception as exc:
        logger.warning("shutdown: the queues' depths could not be read: %s", exc)
        return {}


def _stop(loops: list[Loop]) -> None:
    """Stop the loops, then wait for each (5 s at most) to finish its tick."""
    for loop in loops:
        loop.stop()
    for loop in loops:
        loop.join(5.0)


def _flush_acks(acker: AckService) -> None:
    """Ack what the acker still holds, in the main thread: its own loop has stopped (or
    died, when the acker is what broke: then this fails too, and the jobs are released)."""
    while acker.pending():
        try:
            acker.flush()
        except Exception as exc:
            logger.warning("shutdown: the last acks failed: %s", exc)
            return


def _release(inflight: InFlight, handles: list[JobHandle]) -> int:
    """Give unfinished jobs back to pending; returns how many were released. Each leaves
    `inflight` first, so a handler thread that has not begun it never will (InFlight.begin)."""
    released = 0
    for handle in handles:
        if inflight.in_transaction(handle):
            # Its own transaction locks the row, and a release would wait on that lock:
            # the transaction rolls back when the process ends, and the lease lapses.
            continue
        inflight.remove(handle)
        released += _quietly(handle.release)
    return released


def _crash(inflight: InFlight, using: str, clock: Clock) -> None:
    """A loop died while these handlers ran: one of them may be what broke it (a value no
    heartbeat can write, ...). Each goes back with its attempt and a crash counted, and a job
    that crashed its worker twice goes to the dead letters (operations.crashed), so that
    no poison job takes every restarted worker down in turn."""
    crashed = dead = 0
    for handle in inflight.all():
        if not inflight.is_running(handle) or inflight.in_transaction(handle):
            continue  # awaiting its ack (released below), or its transaction holds the row
        inflight.remove(handle)
        try:
            valid, died = operations.crashed(using, handle.claim, clock())
        except Exception as exc:
            logger.warning("shutdown: could not count the crash of %s job %s: %s",
                           handle.job.queue, handle.job.id, exc)  # fmt: skip
            continue
        if valid:
            handle.settled_by_worker()
        crashed += valid and died is None
        dead += died is not None
    if crashed or dead:
        logger.warning("gave back %d jobs whose handlers ran when the worker broke, their "
                       "crash counted; dead-lettered %d that crashed their worker before",
                       crashed, dead)  # fmt: skip


def _quietly(step: Callable[[], object]) -> bool:
    """A shutdown step that may fail when the database is gone, or when the part it belongs
    to is what broke; the exit goes on."""
    try:
        return bool(step())
    except Exception as exc:
        logger.warning("shutdown step failed: %s", exc)
        return False
