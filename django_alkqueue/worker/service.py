"""The one shape of the worker's loops.

A *service* does one tick in `run_once(now)` and says in `interval` how long to wait before
the next one. `Loop` is the only loop around them: it ticks, waits on a `threading.Event`
(so a shutdown cuts the wait short), backs off after database errors with `Backoff`, and
when anything else escapes a tick it ends and reports its death, which stops the worker
(runner.py): a worker with a broken part must not go on looking alive. Tests call
`run_once(now)` directly, without threads or sleeps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from django.db import DatabaseError, InterfaceError, connections

from ..clock import Clock
from .connections import recycle_connections

logger = logging.getLogger("django_alkqueue")


class Service(Protocol):
    """One tick of periodic work; its interval may change from tick to tick."""

    @property
    def name(self) -> str: ...

    @property
    def interval(self) -> float: ...

    def run_once(self, now: datetime) -> object: ...


class Backoff:
    """The wait after consecutive database errors: 0.1 s, doubling up to 5 s."""

    FIRST = 0.1
    MOST = 5.0

    def __init__(self) -> None:
        self.delay = 0.0

    def next(self) -> float:
        self.delay = min(max(self.delay * 2, self.FIRST), self.MOST)
        return self.delay

    def reset(self) -> None:
        self.delay = 0.0


class Loop:
    """Runs one service until stopped: in a thread of its own (`start`) or in the calling
    thread (`run`).

    Between ticks it waits `service.interval` on `wake` when one is given (an event others
    set to ask for an early tick), else on its stop event. Database errors back off on the
    stop event, never on `wake`, so a busy wake-up source cannot hammer a database that is
    down. Any other exception is a bug or a broken setup: the loop logs it, calls
    `on_death(name)` and ends.
    """

    def __init__(
        self,
        service: Service,
        clock: Clock,
        on_death: Callable[[str], None],
        *,
        stop: threading.Event | None = None,
        wake: threading.Event | None = None,
        refresh: Callable[[], None] | None = recycle_connections,
    ) -> None:
        self.service = service
        self.clock = clock
        self.on_death = on_death
        self.stopping = stop or threading.Event()
        self.wake = wake
        #: Checks this thread's connections before each tick; None for the leader, whose
        #: session holds the advisory lock.
        self.refresh = refresh
        self.died = False
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.service.name

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.wake is not None:
            self.wake.set()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> None:
        backoff = Backoff()
        try:
            while not self.stopping.is_set():
                if self._tick(backoff) and not self.stopping.is_set():
                    self._wait(self.service.interval)
        except Exception:
            self.died = True
            logger.critical("%s: the loop died; stopping the worker", self.name, exc_info=True)
            self.on_death(self.name)
        finally:
            connections.close_all()

    def _tick(self, backoff: Backoff) -> bool:
        """One tick; returns False when it failed on the database and has waited already."""
        try:
            if self.refresh is not None:
                self.refresh()
            self.service.run_once(self.clock())
        except (DatabaseError, InterfaceError) as exc:
            delay = backoff.next()
            logger.warning("%s: database error, retrying in %.1fs: %s", self.name, delay, exc)
            connections.close_all()
            self.stopping.wait(delay)
            return False
        backoff.reset()
        return True

    def _wait(self, seconds: float) -> None:
        if self.wake is None:
            self.stopping.wait(seconds)
            return
        self.wake.wait(seconds)
        self.wake.clear()
