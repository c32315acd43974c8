"""The leader's services: reclaim lapsed leases, sweep expired jobs and old dead letters.

One thread runs them, because on PostgreSQL leadership is a lock held by one connection,
and Django gives each thread its own.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.db import DatabaseError, InterfaceError, connections

from .. import operations
from ..clock import Clock
from ..conf import get_settings
from ..models import TaskResult, Worker
from .leader import Leadership
from .service import Service

logger = logging.getLogger("django_alkqueue")


class Reclaimer:
    """Lapsed leases -> pending (attempts left) or dead letters ("max attempts exceeded")."""

    def __init__(self, using: str, clock: Clock) -> None:
        self.using = using
        self.clock = clock

    def run_once(self) -> tuple[int, int]:
        released, dead = operations.reclaim(self.using, self.clock())
        if released or dead:
            logger.info("reclaimed %d lapsed jobs, dead-lettered %d", len(released), len(dead))
        return len(released), len(dead)


class Sweeper:
    """Expired jobs -> dead letters; dead letters and task results past their retention, and
    long-stale worker rows, deleted."""

    def __init__(self, using: str, clock: Clock) -> None:
        self.using = using
        self.clock = clock

    def run_once(self) -> int:
        now = self.clock()
        moved = operations.sweep_everywhere(self.using, now)
        prune_after = get_settings().WORKER_PRUNE_AFTER
        Worker.objects.using(self.using).stale(now, prune_after).delete()
        _close_orphaned_results(self.using, now)
        TaskResult.objects.using(self.using).filter(expires_at__lte=now).delete()
        if moved:
            logger.info("swept %d expired jobs to the dead letters", moved)
        return moved


def _close_orphaned_results(using: str, now: datetime) -> None:
    try:
        from ..task_runner import close_orphaned_results
    except ImportError:  # no Tasks framework installed: no task results either
        return
    close_orphaned_results(using, now)


class LeaderLoop(Service):
    """Each tick: hold or try to take leadership; when leading, run the services that are due."""

    name = "alk-leader"
    refresh_connections = False

    def __init__(
        self, leadership: Leadership, services: list[tuple[object, float]], clock: Clock
    ) -> None:
        self.leadership = leadership
        self.services = services
        self.clock = clock
        self.interval = min((every for _, every in services), default=1.0)
        self._last_run = [float("-inf")] * len(services)

    def run_once(self) -> bool:
        try:
            leading = self.leadership.acquire(self.clock(), get_settings().WORKER_STALE_AFTER)
        except Exception:
            self.leadership.held = False
            connections[self.leadership.using].close()  # drops the lock with the session
            raise
        if not leading:
            return False
        for index, (service, every) in enumerate(self.services):
            if time.monotonic() - self._last_run[index] >= every:
                self._last_run[index] = time.monotonic()
                try:
                    service.run_once()  # type: ignore[attr-defined]
                except (DatabaseError, InterfaceError):
                    raise  # the loop reconnects, and re-checks leadership
                except Exception:
                    # One broken service must not stop the others.
                    logger.exception("%s failed; the other services go on", service)
        return True
