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
from types import FrameType

from .runner import WorkerOptions

logger = logging.getLogger("django_alkqueue")

RESTART_DELAY = 1.0
#: A child that exits non-zero within this many seconds of starting failed at start-up;
#: after MAX_QUICK_FAILURES of those in a row the supervisor gives up instead of looping.
QUICK_FAILURE = 5.0
MAX_QUICK_FAILURES = 3


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
    if options.burst:
        args.append("--burst")
    if options.takeover:
        args.append("--takeover")
    if options.using:
        args += ["--database", options.using]
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
        self.quick_failures = 0

    def run(self) -> int:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        done: set[int] = set()
        for index in range(self.processes):
            self.children[index] = self._spawn(index, env)
        while len(done) < self.processes:
            for index, child in list(self.children.items()):
                if index in done or child.poll() is None:
                    continue
                finished_cleanly = child.returncode == 0 and (
                    self.options.burst or self.options.max_jobs is not None
                )
                if self.stopping.is_set() or finished_cleanly:
                    done.add(index)
                    continue
                if time.monotonic() - self.started_at[index] < QUICK_FAILURE:
                    self.quick_failures += 1
                    if self.quick_failures >= MAX_QUICK_FAILURES:
                        logger.error("worker processes keep failing at start-up; giving up")
                        self._stop_all()
                        return 1
                else:
                    self.quick_failures = 0
                logger.warning("worker process %d exited with %s; restarting it",
                               child.pid, child.returncode)  # fmt: skip
                self.stopping.wait(RESTART_DELAY)
                if not self.stopping.is_set():
                    self.children[index] = self._spawn(index, env)
            time.sleep(0.1)
        return 0

    def _spawn(self, index: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
        command = child_command(self.options, index, self.verbosity)
        self.started_at[index] = time.monotonic()
        # Their own session: a Ctrl-C or a signal to our process group reaches the children
        # once, through us, not twice (which they would take as "exit now").
        return subprocess.Popen(command, env=env, start_new_session=True)

    def _stop_all(self) -> None:
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in self.children.values():
            child.wait()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        self.stopping.set()
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM if self._signals == 1 else signal.SIGKILL)
