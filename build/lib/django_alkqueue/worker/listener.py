"""LISTEN for enqueue wake-ups (PostgreSQL). One dedicated connection per worker process;
ALKQUEUE["LISTEN_DATABASE"] may name an alias that bypasses a transaction-mode pooler.
A lost connection is re-established; polling stays the safety net meanwhile."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import connections

from ..sql.postgresql import NOTIFY_CHANNEL

logger = logging.getLogger("django_alkqueue")


class Listener:
    def __init__(
        self, using: str, queues: set[str], wake: threading.Event, notified: threading.Event
    ) -> None:
        self.using = using
        self.queues = queues
        self.wake = wake
        #: Tells the claim loop why it woke: a NOTIFY makes its next look a full one.
        self.notified = notified
        self.connected = threading.Event()

    def _connect(self) -> Any:
        wrapper = connections[self.using]
        connection = wrapper.get_new_connection(wrapper.get_connection_params())
        connection.autocommit = True
        connection.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return connection

    def run(self, stop: threading.Event) -> None:
        backoff = 0.0
        while not stop.is_set():
            connection = None
            try:
                connection = self._connect()
                self.connected.set()
                backoff = 0.0
                while not stop.is_set():
                    for notify in connection.notifies(timeout=0.5):
                        if notify.payload in self.queues:
                            self.notified.set()  # before the wake-up, which reads it
                            self.wake.set()
            except Exception as exc:
                self.connected.clear()
                backoff = min(max(backoff * 2, 0.2), 5.0)
                logger.warning("listener: connection lost, retrying in %.1fs: %s", backoff, exc)
                stop.wait(backoff)
            finally:
                if connection is not None:
                    connection.close()

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="alk-listener", daemon=True)
        thread.start()
        return thread
