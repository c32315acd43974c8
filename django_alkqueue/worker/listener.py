"""Hear enqueue wake-ups: on PostgreSQL, LISTEN (also for the cancels of the jobs this worker
runs) on one dedicated connection per worker process, which ALKQUEUE["LISTEN_DATABASE"] may
point past a transaction-mode pooler; elsewhere, this process's socket for wake-ups from
enqueues on the same host (sql/local_wakeups.py). A lost connection is re-established;
polling stays the safety net meanwhile."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime

from django.db import DatabaseError, InterfaceError, connections

from ..sql import Notifications, dialect_for

logger = logging.getLogger("django_alkqueue")
#: Seconds before a listener whose wake-up socket could not be bound tries again.
RETRY_AFTER = 30


class ListenService:
    """The service that LISTENs: each tick waits up to half a second for notifications on
    its own connection, opened on the first tick and again after it was lost."""

    name = "alk-listener"
    #: Each tick blocks on the connection itself, so the loop need not wait between them.
    interval = 0.0

    def __init__(
        self,
        using: str,
        queues: set[str],
        wake: threading.Event,
        notified: threading.Event,
        cancels: tuple[str, Callable[[int], object]] | None = None,
    ) -> None:
        self.using = using
        #: This worker's id and what to call with each job id cancelled while it runs.
        self.cancels = cancels
        self.queues = queues
        self.wake = wake
        #: Tells the claim loop why it woke: a NOTIFY makes its next look a full one.
        self.notified = notified
        self.connected = threading.Event()
        self._session: ExitStack | None = None
        self._wait: Notifications | None = None
        self._retry_at = 0.0
        self._warned = False

    def run_once(self, now: datetime) -> int:
        """Wait up to 0.5 s for notifications; returns how many named a served queue. A
        lost connection is closed and its error (Django's, the dialect translates the
        driver's) raised, so the loop backs off before the next tick connects again."""
        if self._wait is None and time.monotonic() < self._retry_at:
            time.sleep(0.5)  # the socket could not be bound: polling finds the jobs
            return 0
        try:
            if self._wait is None:
                self._wait = self._open()
                self.connected.set()
                self._warned = False
            woken = 0
            for queue_name in self._wait(0.5):
                if queue_name in self.queues:
                    self.notified.set()  # before the wake-up, which reads it
                    self.wake.set()
                    woken += 1
            return woken
        except (DatabaseError, InterfaceError):
            self.close()
            raise
        except OSError as error:  # the wake-up directory (sql/local_wakeups.py)
            self.close()
            self._retry_at = time.monotonic() + RETRY_AFTER
            if not self._warned:
                self._warned = True
                logger.warning(
                    "%s: no wake-ups from enqueues on this host (%s); polling every "
                    "--poll-interval, trying again in %d s", self.name, error, RETRY_AFTER,
                )  # fmt: skip
            return 0

    def close(self) -> None:
        self.connected.clear()
        self._wait = None
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def _open(self) -> Notifications:
        connection = connections[self.using]
        session = ExitStack()
        wait = session.enter_context(dialect_for(connection).listen(connection, self.cancels))
        self._session = session
        return wait
