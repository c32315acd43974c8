"""Worker processes for the chaos scenarios, and database calls that ride out an outage.

Builds on tests/workers.py (the test database's environment, the alk_worker command); adds
what chaos needs: an output reader per process, SIGKILL of a whole process tree (a supervisor
starts its children in sessions of their own), and a command prefix for `ip netns exec`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, connections

from tests.conftest import wait_until
from tests.workers import Watched, database_env, worker_command

T = TypeVar("T")


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid`, read from /proc."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children[int(fields[1])].append(int(entry))
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


class ChaosWorker(Watched):
    """One `alk_worker` process (or supervisor) whose output is read as it comes."""

    def __init__(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
        worker_id: str | None = None,
    ) -> None:
        self.worker_id = worker_id
        command = [*prefix, *worker_command(*args)]
        if worker_id is not None:
            command += ["--worker-id", worker_id]
        process = subprocess.Popen(
            command,
            env={**database_env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._terminated = False
        super().__init__(process)

    def kill(self) -> None:
        """SIGKILL the process and every process it started."""
        for pid in [self.pid, *descendants(self.pid)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self._reader.join(5)

    def terminate(self) -> None:
        """One SIGTERM: finish in-flight jobs, then exit. (A second one means "exit now": the
        supervisor SIGKILLs its children, a worker calls os._exit.)"""
        if self.alive() and not self._terminated:
            self._terminated = True
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM once, then wait; SIGKILL the tree if it does not exit in time. Returns the
        exit code of a clean stop, None when it had to be killed."""
        self.terminate()
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        self._reader.join(5)
        return code


def serving(*queues: str, threads: int = 4, processes: int = 1) -> list[str]:
    """alk_worker arguments: serve `queues`, poll every 0.2 s, log warnings only."""
    args = [arg for name in queues for arg in ("--queue", name)]
    args += ["--concurrency", str(threads), "--poll-interval", "0.2", "-v", "0"]
    return args + (["--processes", str(processes)] if processes > 1 else [])


class Fleet:
    """The workers a test started; whatever is left is killed at teardown."""

    def __init__(self) -> None:
        self.started: list[ChaosWorker] = []

    def start(self, *args: str, **options: object) -> ChaosWorker:
        worker = ChaosWorker(*args, **options)  # type: ignore[arg-type]
        self.started.append(worker)
        return worker

    def outputs(self) -> str:
        return "\n".join(f"--- worker {w.worker_id or w.pid}:\n{w.output}" for w in self.started)

    def stop_all(self, timeout: float = 30) -> dict[str, int | None]:
        """Stop the live workers together (SIGTERM to all, then wait); returns their codes."""
        live = [w for w in self.started if w.alive()]
        for worker in live:
            worker.terminate()
        return {worker.worker_id or str(worker.pid): worker.stop(timeout) for worker in live}

    def kill_all(self) -> None:
        for worker in self.started:
            worker.kill()


def riding_out(call: Callable[[], T], timeout: float = 60.0) -> T:  # noqa: UP047 (make test-compat runs on Python 3.11)
    """`call()`, retried while the database is restarting or unreachable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except (DatabaseError, InterfaceError):
            connections.close_all()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, every: float = 0.1) -> None:
    """`wait_until` (tests/conftest.py), with database outages ridden out on each check."""
    deadline = time.monotonic() + timeout

    def check() -> bool:
        return riding_out(predicate, timeout=max(deadline - time.monotonic(), 1.0))

    wait_until(check, timeout, every, what)
