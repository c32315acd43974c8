"""Handler threads. Daemon threads, so that a handler stuck past the shutdown timeout cannot
keep the process alive once its claim has been released."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from django.db import connections

logger = logging.getLogger("django_alkqueue")

Task = Callable[[], None]


class ThreadPool:
    def __init__(self, size: int, name: str = "alk-handler") -> None:
        self._tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, task: Task) -> None:
        self._tasks.put(task)

    def stop(self) -> None:
        for _ in self._threads:
            self._tasks.put(None)

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` in all (not per thread) for the threads to end."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            try:
                task()
            except Exception:
                logger.exception("unexpected error in a handler thread")
        connections.close_all()
