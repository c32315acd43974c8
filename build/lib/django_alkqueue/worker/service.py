"""The one loop shape of every periodic service: `run_once()` does one tick and returns what it
did; `run()` repeats it every `interval` until stopped, backing off after database errors.
Tests call `run_once()` directly, without threads or sleeps.
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError, InterfaceError, connections

from .connections import recycle_connections

logger = logging.getLogger("django_alkqueue")

MAX_BACKOFF = 5.0


class Service:
    name = "service"
    interval = 1.0
    #: Close connections Django considers old before each tick (off for the leader, whose
    #: session holds the advisory lock).
    refresh_connections = True

    def run_once(self) -> object:
        raise NotImplementedError

    def run(self, stop: threading.Event) -> None:
        backoff = 0.0
        while not stop.is_set():
            try:
                if self.refresh_connections:
                    recycle_connections()
                self.run_once()
                backoff = 0.0
                wait = self.interval
            except (DatabaseError, InterfaceError) as exc:
                backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF)
                wait = backoff
                logger.warning("%s: database error, retrying in %.1fs: %s", self.name, wait, exc)
                connections.close_all()
            except Exception:
                # A bug or bad configuration must not end the loop: log it, keep ticking.
                backoff = min(max(backoff * 2, 0.1), MAX_BACKOFF)
                wait = max(backoff, self.interval)
                logger.exception("%s: unexpected error; retrying in %.1fs", self.name, wait)
            stop.wait(wait)
        connections.close_all()

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name=self.name, daemon=True)
        thread.start()
        return thread
