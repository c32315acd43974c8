"""--processes P: run P worker processes, restart any that dies, stop them all on a signal.

Children are fresh interpreters running `alk_worker` with --processes 1 (no fork of a process
with threads and open database connections)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

from .. import defaults
from .exits import EXIT_CONFIG
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

    def run(self) -> int:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        relay = SignalRelay(self._on_signal)
        relay.install([signal.SIGTERM, signal.SIGINT])
        try:
            return self._supervise(env)
        finally:
            relay.close()

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
            self.stopping.wait(0.1)
        return 0

    def _spawn(self, index: int, env: dict[str, str]) -> None:
        command = child_command(self.options, index, self.verbosity)
        self.started_at[index] = time.monotonic()
        # Their own session: a Ctrl-C or a signal to our process group reaches the children
        # only through us, not also directly (which they would take as a second signal).
        child = self.children[index] = subprocess.Popen(command, env=env, start_new_session=True)
        # A stop that came in while it started may have missed it (_on_signal runs on the
        # relay's thread); it is in self.children before this check, so one of the two sees it.
        if self.stopping.is_set():
            child.send_signal(SUPERVISOR_STOP)

    def _stop_all(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(SUPERVISOR_STOP)
        for child in self.children.values():
            child.wait()

    def _on_signal(self, signum: int) -> None:
        # The first stop is forwarded as SUPERVISOR_STOP, which a child never counts as a
        # signal: under systemd's default KillMode=control-group a child also gets the
        # SIGTERM directly, and the two must add up to one graceful shutdown, not "exit now".
        self._signals += 1
        self.stopping.set()
        for child in list(self.children.values()):
            if child.poll() is None:
                child.send_signal(SUPERVISOR_STOP if self._signals == 1 else signal.SIGKILL)
