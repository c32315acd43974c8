"""LISTEN for enqueue wake-ups (PostgreSQL). One dedicated connection per worker process;
ALKQUEUE["LISTEN_DATABASE"] may name an alias that bypasses a transaction-mode pooler.
A lost connection is re-established; polling stays the safety net meanwhile."""

from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, cast

from django.db import DatabaseError, connections

from ..sql.postgresql import NOTIFY_CHANNEL


class Listener:
    """The service that LISTENs: each tick waits up to half a second for notifications on
    its own connection, opened on the first tick and again after it was lost."""

    name = "alk-listener"
    #: Each tick blocks on the connection itself, so the loop need not wait between them.
    interval = 0.0

    def __init__(
        self, using: str, queues: set[str], wake: threading.Event, notified: threading.Event
    ) -> None:
        self.using = using
        self.queues = queues
        self.wake = wake
        #: Tells the claim loop why it woke: a NOTIFY makes its next look a full one.
        self.notified = notified
        self.connected = threading.Event()
        self._connection: Any = None

    def run_once(self, now: datetime) -> int:
        """Wait up to 0.5 s for notifications; returns how many named a served queue. A
        driver error closes the connection and is raised as Django's DatabaseError, so the
        loop backs off before the next tick connects again."""
        # The driver's own errors (DB-API's module.Error): this connection is the driver's,
        # not one Django wraps.
        driver_error: type[Exception] = cast(Any, connections[self.using]).Database.Error
        try:
            if self._connection is None:
                self._connection = self._connect()
                self.connected.set()
            woken = 0
            for notify in self._connection.notifies(timeout=0.5):
                if notify.payload in self.queues:
                    self.notified.set()  # before the wake-up, which reads it
                    self.wake.set()
                    woken += 1
            return woken
        except driver_error as exc:
            self.close()
            raise DatabaseError(f"listener connection lost: {exc}") from exc

    def close(self) -> None:
        self.connected.clear()
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()

    def _connect(self) -> Any:
        wrapper = connections[self.using]
        connection = wrapper.get_new_connection(wrapper.get_connection_params())
        connection.autocommit = True
        connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return connection
