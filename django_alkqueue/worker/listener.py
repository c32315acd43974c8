"""LISTEN for enqueue wake-ups, and for the cancels of the jobs this worker runs (PostgreSQL).
One dedicated connection per worker process;
ALKQUEUE["LISTEN_DATABASE"] may name an alias that bypasses a transaction-mode pooler.
A lost connection is re-established; polling stays the safety net meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import ExitStack
from datetime import datetime

from django.db import DatabaseError, InterfaceError, connections

from ..sql import Notifications, dialect_for


class Listener:
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

    def run_once(self, now: datetime) -> int:
        """Wait up to 0.5 s for notifications; returns how many named a served queue. A
        lost connection is closed and its error (Django's, the dialect translates the
        driver's) raised, so the loop backs off before the next tick connects again."""
        try:
            if self._wait is None:
                self._wait = self._open()
                self.connected.set()
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
