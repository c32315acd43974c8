"""--processes P: run P worker processes, restart any that dies, stop them all on a signal.

Children are fresh interpreters running `alk_worker` with --processes 1 (no fork of a process
with threads and open database connections). Each tells us on a pipe which jobs its handlers
run (job_notices.py); when one dies of its handler (an exit of its own, a crash signal), a
crash is counted for each of those jobs (docs/reliability.md)."""

from __future__ import annotations

import dataclasses
import logging
import os
import selectors
import signal
import subprocess
import sys
import threading
import time

from django.db import connections

from .. import defaults, operations
from ..clock import system_clock
from ..conf import get_settings
from ..sql import Claim, CrashRetry
from .child_exits import crashed_by_its_job, death_text
from .exits import EXIT_CONFIG, WORKER_EXITS
from .job_notices import StartedJobs
from .runner import SUPERVISOR_STOP, WorkerOptions
from .signal_relay import SignalRelay

logger = logging.getLogger("django_alkqueue")

#: A child that crashes again soon after its start waits longer before each restart, up to a
#: minute, so a broken deploy does not spin a crash loop every second forever; one that ran
#: `STABLE_AFTER` seconds starts the curve again.
FIRST_RESTART_DELAY = 1.0
MOST_RESTART_DELAY = 60.0
STABLE_AFTER = 30.0


def restart_delay(previous: float | None, ran_for: float) -> float:
    """The wait before restarting a child that ran `ran_for` seconds, after `previous` (the
    wait before its last restart; None for the first)."""
    if previous is None or ran_for >= STABLE_AFTER:
        return FIRST_RESTART_DELAY
    return min(previous * 2, MOST_RESTART_DELAY)


def child_command(options: WorkerOptions, index: int, verbosity: int) -> list[str]:
    args = [sys.executable, "-m", "django", "alk_worker", "--processes", "1"]
    for name in options.queues:
        args += ["--queue", name]
    args += ["--concurrency", str(options.concurrency)]
    args += ["--poll-interval", str(options.poll_interval)]
    args += ["--shutdown-timeout", str(options.shutdown_timeout)]
    args += ["-v", str(verbosity)]
    if options.batch is not None:
        args += ["--batch", str(options.batch)]
    if options.max_jobs is not None:
        args += ["--max-jobs", str(options.max_jobs)]
    if options.worker_id:
        args += ["--worker-id", f"{options.worker_id}-{index}"]
    if options.max_stuck != defaults.WORKER_MAX_STUCK:
        args += ["--max-stuck", str(options.max_stuck)]
    if options.pool != defaults.WORKER_POOL:
        args += ["--pool", options.pool, "--kill-grace", str(options.kill_grace)]
        if options.max_jobs_per_child is not None:
            args += ["--max-jobs-per-child", str(options.max_jobs_per_child)]
    if options.burst:
        args.append("--burst")
    if options.takeover:
        args.append("--takeover")
    if options.using:
        args += ["--database", options.using]
    if options.health_file:
        # One file for all: it stays fresh while any child heartbeats (docs/operations.md).
        args += ["--health-file", options.health_file]
    if options.notices_fd is not None:
        args += ["--notices-fd", str(options.notices_fd)]
    return args


class Supervisor:
    def __init__(self, options: WorkerOptions, processes: int, verbosity: int) -> None:
        self.options = options
        self.processes = processes
        self.verbosity = verbosity
        self.stopping = threading.Event()
        self._signals = 0
        self.children: dict[int, subprocess.Popen[bytes]] = {}
        self.started_at: dict[int, float] = {}
        self.delays: dict[int, float] = {}
        #: Each running child's pipe: the jobs its handlers run (job_notices.py).
        self.notices: dict[int, StartedJobs] = {}
        self._selector = selectors.DefaultSelector()

    def run(self) -> int:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        relay = SignalRelay(self._on_signal)
        relay.install([signal.SIGTERM, signal.SIGINT])
        try:
            return self._supervise(env)
        finally:
            relay.close()
            self._selector.close()

    def _supervise(self, env: dict[str, str]) -> int:
        done: set[int] = set()
        restart_at: dict[int, float] = {}  # children waiting out their restart delay
        for index in range(self.processes):
            self._spawn(index, env)
        while len(done) < self.processes:
            now = time.monotonic()
            for index, child in list(self.children.items()):
                if index in done:
                    continue
                if index in restart_at:
                    if self.stopping.is_set():
                        done.add(index)
                    elif now >= restart_at[index]:
                        del restart_at[index]
                        self._spawn(index, env)
                    continue
                if child.poll() is None:
                    continue
                self._count_crashes(child)
                finished_cleanly = child.returncode == 0 and (
                    self.options.burst or self.options.max_jobs is not None
                )
                if self.stopping.is_set() or finished_cleanly:
                    done.add(index)
                    continue
                if child.returncode == EXIT_CONFIG:
                    # A configuration error: every restart would fail the same way.
                    logger.error("a worker process refused to start; stopping them all")
                    self._stop_all()
                    return EXIT_CONFIG
                delay = self.delays[index] = restart_delay(
                    self.delays.get(index), ran_for=now - self.started_at[index]
                )
                logger.warning("worker process %d exited with %s; restarting it in %g s",
                               child.pid, child.returncode, delay)  # fmt: skip
                restart_at[index] = now + delay
            self._read_notices(0.1)
        return 0

    def _spawn(self, index: int, env: dict[str, str]) -> None:
        ours, theirs = os.pipe()
        options = dataclasses.replace(self.options, notices_fd=theirs)
        command = child_command(options, index, self.verbosity)
        self.started_at[index] = time.monotonic()
        # Their own session: a Ctrl-C or a signal to our process group reaches the children
        # only through us, not also directly (which they would take as a second signal).
        try:
            child = self.children[index] = subprocess.Popen(
                command, env=env, start_new_session=True, pass_fds=(theirs,)
            )
        except Exception:
            os.close(ours)
            raise
        finally:
            os.close(theirs)  # the child's now: its death closes the pipe
        notices = self.notices[child.pid] = StartedJobs(ours)
        self._selector.register(ours, selectors.EVENT_READ, notices)
        # A stop that came in while it started may have missed it (_on_signal runs on the
        # relay's thread); it is in self.children before this check, so one of the two sees it.
        if self.stopping.is_set():
            child.send_signal(SUPERVISOR_STOP)

    def _read_notices(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for what the children write, and take it in."""
        if not self.notices:
            self.stopping.wait(timeout)
            return
        for key, _ in self._selector.select(timeout):
            notices: StartedJobs = key.data
            notices.read()
            if notices.at_end:  # its child is gone, or going: nothing more to wait for
                self._selector.unregister(key.fd)

    def _close_notices(self, child: subprocess.Popen[bytes]) -> set[Claim]:
        """The jobs `child` was running when it exited, as it told; its pipe is closed."""
        notices = self.notices.pop(child.pid, None)
        if notices is None:
            return set()
        if not notices.at_end:
            self._selector.unregister(notices.fd)
        return notices.close()

    def _count_crashes(self, child: subprocess.Popen[bytes]) -> None:
        """`child` has exited: if its handlers took it down (an exit status of its own that
        is not the worker's, or a crash signal), each job it was running has a crash counted
        and is pending again at once, or dead at its second crash ("crashed its worker").
        Killed from outside (SIGKILL, SIGTERM), its jobs wait for their leases to lapse."""
        running = self._close_notices(child)
        if not running or not crashed_by_its_job(child.returncode, WORKER_EXITS):
            return
        using = self.options.using or get_settings().DATABASE
        text = death_text(child.pid, child.returncode, "worker process")
        counted = dead = 0
        for claim in sorted(running):
            now = system_clock()
            try:
                valid, died = operations.crashed(using, claim, now, CrashRetry(now, text))
            except Exception as exc:  # its lease brings it back all the same
                logger.warning("could not count the crash of job %s: %s", claim.id, exc)
                continue
            counted += valid and died is None
            dead += died is not None
        connections[using].close()  # the supervisor keeps no connection between crashes
        logger.warning("%s while it ran %d jobs: %d given back with a crash counted, %d "
                       "dead-lettered as crashed their worker", text, len(running), counted,
                       dead)  # fmt: skip

    def _stop_all(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(SUPERVISOR_STOP)
        for child in self.children.values():
            child.wait()
            self._close_notices(child)

    def _on_signal(self, signum: int) -> None:
        # The first stop is forwarded as SUPERVISOR_STOP, which a child never counts as a
        # signal: under systemd's default KillMode=control-group a child also gets the
        # SIGTERM directly, and the two must add up to one graceful shutdown, not "exit now".
        self._signals += 1
        self.stopping.set()
        for child in list(self.children.values()):
            if child.poll() is None:
                child.send_signal(SUPERVISOR_STOP if self._signals == 1 else signal.SIGKILL)
