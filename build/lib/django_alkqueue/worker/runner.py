"""One worker process, start to finish. The order of start-up and shutdown is written out in
`Worker.run` as a plain sequence; each step is a small object with its own tests."""

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
from types import FrameType
from typing import Any

from django.db import DatabaseError, InterfaceError, connections

from ..clock import Clock, system_clock
from ..conf import get_settings
from ..consumers import ConsumerSpec, registry
from ..models import QueueMessage
from ..periodic import Scheduler
from ..queues import JobHandle, queue
from ..sql import dialect_for
from ..sql.wake_pacing import follow_up_delay
from .acker import Acker
from .claimer import Claimer, PausedQueues
from .consumer_table import sync_consumers
from .executor import Executor
from .inflight import InFlight
from .leader import Leadership
from .lease_keeper import LeaseKeeper, keeper_interval
from .listener import Listener
from .maintenance import LeaderLoop, Reclaimer, Sweeper
from .pool import ThreadPool
from .presence import Presence
from .queue_stats import STATS_INTERVAL, QueueStatDeltas, QueueStatWriter
from .report import StatusReporter, Stream, burst_table
from .startup import StartupRefused
from .stats import WorkerStats
from .units import Dispatch, worker_capacity
from .vacuumer import Vacuumer

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
    concurrency: int = 4
    batch: int | None = None
    poll_interval: float = 1.0
    shutdown_timeout: float = 30.0
    worker_id: str | None = None
    burst: bool = False
    max_jobs: int | None = None
    takeover: bool = False
    using: str | None = None


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def resolve_specs(names: tuple[str, ...]) -> list[ConsumerSpec]:
    """The consumers this worker serves: the named queues, or every @consumer queue and every
    queue an alkqueue task backend declares. Task queues get the built-in task consumer."""
    if registry.errors:
        raise StartupRefused("; ".join(registry.errors))
    tasks = _task_queues()
    mixed = [name for name in tasks.declared() if registry.get(name) is not None]
    if mixed:
        raise StartupRefused(
            f"queue(s) {', '.join(mixed)} have a @consumer and are also task queues in "
            "TASKS QUEUES; a queue is one or the other"
        )
    if not names:
        names = tuple(s.queue for s in registry.all()) + tuple(tasks.declared())
        if not names:
            raise StartupRefused("no @consumer is registered and no task queue is declared")
    specs = {n: registry.get(n) or tasks.spec(n) for n in dict.fromkeys(names)}
    missing = [n for n, spec in specs.items() if spec is None]
    if missing:
        raise StartupRefused(f"no @consumer or task backend for queue(s) {', '.join(missing)}")
    return [spec for spec in specs.values() if spec is not None]


class _TaskQueues:
    """The task queues of alkqueue task backends; none where no Tasks framework is installed
    (Django 5.2 without the django-tasks backport)."""

    def __init__(self) -> None:
        try:
            from .. import task_runner
        except ImportError:
            self._runner = None
        else:
            self._runner = task_runner

    def declared(self) -> list[str]:
        return self._runner.declared_task_queues() if self._runner else []

    def spec(self, name: str) -> ConsumerSpec | None:
        return self._runner.task_queue_spec(name) if self._runner else None


def _task_queues() -> _TaskQueues:
    return _TaskQueues()


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
        self.stop_services = threading.Event()  # end of shutdown: background loops end
        self.stop_acker = threading.Event()
        self.wake = threading.Event()
        self._signals = 0

    # -- the sequence ----------------------------------------------------------------------

    def run(self) -> int:
        # Signals first: a stop requested during start-up still ends in a clean shutdown.
        previous_handlers = self._install_signal_handlers()
        try:
            return self._run()
        finally:
            for signum, handler in previous_handlers.items():
                signal.signal(signum, handler)

    def _run(self) -> int:
        specs = resolve_specs(self.options.queues)
        sync_consumers(specs, self.using, self.options.takeover, self.clock())
        queues = [queue(spec.queue, using=self.using, clock=self.clock) for spec in specs]
        names = [q.name for q in queues]

        stats = WorkerStats()
        inflight = InFlight(changed=self.wake)
        acker = Acker(self.using, inflight, stats, get_settings().ACK_WINDOW)
        executor = Executor({s.queue: s for s in specs}, acker, inflight, stats, self.using)
        capacity = worker_capacity(self.options.concurrency, self.options.batch, specs)
        pool = ThreadPool(self.options.concurrency, executor.run_unit)
        claimer = Claimer(
            queues, self.worker_id, inflight, Dispatch(executor.specs, pool.submit), capacity,
            self.options.batch,
            PausedQueues(self.using, names, self.options.poll_interval), self.options.max_jobs,
            poll_interval=self.options.poll_interval,
            follow_up=follow_up_delay(get_settings().NOTIFY_WINDOW),
        )  # fmt: skip
        presence = Presence(
            self.using, self.worker_id, names, self.options.concurrency, stats, self.clock,
            get_settings().WORKER_HEARTBEAT_INTERVAL,
        )  # fmt: skip
        stat_deltas = QueueStatDeltas(
            self.using, stats, self.clock, get_settings().WORKER_HEARTBEAT_INTERVAL
        )
        # The advisory lock lives on a session: behind a transaction-mode pooler that is the
        # direct LISTEN_DATABASE connection, never a pooled one.
        leadership = Leadership(get_settings().LISTEN_DATABASE or self.using, self.worker_id)
        leader_services: list[tuple[object, float]] = [
            (Reclaimer(self.using, self.clock), get_settings().RECLAIM_INTERVAL),
            (Sweeper(self.using, self.clock), get_settings().SWEEP_INTERVAL),
            (QueueStatWriter(self.using, self.clock), STATS_INTERVAL),
            (Vacuumer(self.using), get_settings().RECLAIM_INTERVAL),
        ]
        if get_settings().PERIODIC:
            leader_services.append(
                (Scheduler(self.using, self.clock), get_settings().SCHEDULE_INTERVAL)
            )
        leader_loop = LeaderLoop(leadership, leader_services, self.clock)

        presence.register()
        pool.start()
        acker_thread = acker.start(self.stop_acker)
        keeper = LeaseKeeper(inflight, self.using, keeper_interval([q.lease for q in queues]))
        services = [keeper.start(self.stop_services), presence.start(self.stop_services),
                    leader_loop.start(self.stop_services)]  # fmt: skip
        services.append(stat_deltas.start(self.stop_services))
        listen_alias = get_settings().LISTEN_DATABASE or self.using
        if dialect_for(connections[listen_alias]).supports_notify:
            listener = Listener(listen_alias, set(names), self.wake, claimer.notified)
            services.append(listener.start(self.stop_services))
        # With --burst too: a long drain reports as it goes, and ends with the table.
        reporter = StatusReporter(stats, inflight.count, lambda: _depth(self.using, names),
                                  self.stdout)  # fmt: skip
        services.append(reporter.start(self.stop_services))
        logger.info(
            "worker %s serving %s with %d threads", self.worker_id, ", ".join(names),
            self.options.concurrency,
        )  # fmt: skip

        self._claim_until_stopped(claimer, inflight, acker)

        # Jobs no thread has started (prefetched with --batch) go back now: running them
        # would only delay the exit, and they are released anyway.
        released = _release(inflight, pool.stop())
        self._drain(inflight, self.options.shutdown_timeout)
        self.stop_acker.set()
        acker_thread.join(5.0)  # the acks of jobs that finished in time
        released += _release(inflight, inflight.all())
        if released:
            logger.warning("released %d unfinished jobs back to pending", released)
        # Loops end; the leader's thread closes its connection, which drops the advisory lock.
        self.stop_services.set()
        for thread in services:
            thread.join(5.0)
        pool.join(0.5)
        _quietly(stat_deltas.run_once)  # what finished since the last flush
        _quietly(presence.unregister)
        if self.options.burst:
            self.stdout.write(burst_table(stats, _depths(self.using, names)) + "\n")
        return 0

    # -- the steps -------------------------------------------------------------------------

    def _claim_until_stopped(self, claimer: Claimer, inflight: InFlight, acker: Acker) -> None:
        backoff = 0.0
        while not self.stop_claiming.is_set():
            # Idle is judged before the claim: a handler may retry a job (making it due) and
            # leave between the claim and a later look, which would end a burst too early.
            was_idle = inflight.count() == 0 and acker.pending() == 0
            try:
                claimed = claimer.run_once()
                backoff = 0.0
            except (DatabaseError, InterfaceError) as exc:
                backoff = min(max(backoff * 2, 0.1), 5.0)
                logger.warning("claim: database error, retrying in %.1fs: %s", backoff, exc)
                connections.close_all()
                self.stop_claiming.wait(backoff)
                continue
            if claimer.exhausted() and inflight.count() == 0 and acker.pending() == 0:
                return
            if self.options.burst and claimed == 0 and was_idle:
                return
            if claimer.came_back_full and claimer.worth_claiming():
                continue  # more may be due right now
            # A claim that came back short emptied the queue as of its snapshot: anything
            # enqueued since sends a NOTIFY (which sets the wake-up event waited on below), or
            # follows one closely enough for that NOTIFY's follow-up look to find it.
            # Woken by a NOTIFY, a handler finishing or a signal; else a follow-up or a poll.
            claimer.wait(self.wake)

    def _drain(self, inflight: InFlight, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while inflight.count() and time.monotonic() < deadline and self._signals < 2:
            inflight.changed.wait(min(0.1, max(deadline - time.monotonic(), 0)))
            inflight.changed.clear()

    def _install_signal_handlers(self) -> dict[int, Any]:
        """Catch SIGTERM, SIGINT and the supervisor's SIGUSR1 (main thread only); returns
        the handlers replaced."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        replaced: dict[int, Any] = {
            signum: signal.signal(signum, self._on_signal) for signum in STOP_SIGNALS
        }
        replaced[SUPERVISOR_STOP] = signal.signal(SUPERVISOR_STOP, self._on_supervisor_stop)
        return replaced

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            # Second signal, however soon after the first: leave now; the leases lapse and
            # reclaim returns the jobs.
            os._exit(1)
        self._stop_gracefully(signum)

    def _on_supervisor_stop(self, signum: int, frame: FrameType | None) -> None:
        self._stop_gracefully(signum)

    def _stop_gracefully(self, signum: int) -> None:
        if not self.stop_claiming.is_set():
            logger.info("signal %d: finishing in-flight jobs, claiming no more", signum)
        self.stop_claiming.set()
        self.wake.set()


def _depth(using: str, names: list[str]) -> int:
    return QueueMessage.objects.using(using).filter(queue__in=names).count()


def _depths(using: str, names: list[str]) -> dict[str, int]:
    from django.db.models import Count

    rows = (
        QueueMessage.objects.using(using)
        .filter(queue__in=names)
        .values_list("queue")
        .annotate(n=Count("id"))
    )
    return {name: 0 for name in names} | dict(rows)


def _release(inflight: InFlight, handles: list[JobHandle]) -> int:
    """Give unfinished jobs back to pending; returns how many were released. Each leaves
    `inflight` first, so a handler thread that has not begun it never will (InFlight.begin)."""
    released = 0
    for handle in handles:
        inflight.remove(handle)
        released += _quietly(handle.release)
    return released


def _quietly(step: Callable[[], object]) -> bool:
    """A shutdown step that may fail when the database is gone; the exit goes on."""
    try:
        return bool(step())
    except (DatabaseError, InterfaceError) as exc:
        logger.warning("shutdown step failed: %s", exc)
        return False
