"""The leader's services: reclaim lapsed leases, release lapsed waits for a signal, sweep
expired jobs, old dead letters and old fair claim buckets.

One thread runs them, because on PostgreSQL leadership is a lock held by one connection,
and Django gives each thread its own.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.db import connections

from .. import operations, task_queues, waits
from ..conf import get_settings
from ..models import TaskResult, Worker
from ..workflows import sweep as workflow_sweep
from .leader import Leadership
from .service import Service

logger = logging.getLogger("django_alkqueue")

#: Fair claim buckets one sweep deletes at most (one row per queue, fair key and 5 minutes).
FAIR_CLAIMS_BATCH = 5_000


class ReclaimService:
    """Lapsed leases -> pending (attempts left) or dead letters ("max attempts exceeded")."""

    name = "reclaim"

    def __init__(self, using: str) -> None:
        self.using = using

    @property
    def interval(self) -> float:
        return get_settings().RECLAIM_INTERVAL

    def run_once(self, now: datetime) -> tuple[int, int]:
        released, dead = operations.reclaim(self.using, now)
        if released or dead:
            logger.info("reclaimed %d lapsed jobs, dead-lettered %d", len(released), len(dead))
        return len(released), len(dead)


class WaitReleaseService:
    """Waits for a signal past their deadline -> pending, their wait recorded as timed out
    (job.wait_for(name, timeout); docs/durable-steps.md). As often as the reclaim: a timed
    wait resumes within RECLAIM_INTERVAL of its deadline."""

    name = "release-waits"

    def __init__(self, using: str) -> None:
        self.using = using

    @property
    def interval(self) -> float:
        return get_settings().RECLAIM_INTERVAL

    def run_once(self, now: datetime) -> int:
        resumed = waits.release_lapsed(self.using, now)
        if resumed:
            logger.info("resumed %d jobs whose wait for a signal timed out", resumed)
        return resumed


class SweepService:
    """Expired jobs -> dead letters; dead letters and task results past their retention,
    long-stale worker rows, the cancel requests of workers gone, lapsed unique windows and
    fair claim buckets older than two hours (up to `fair_claims_batch` a sweep), deleted."""

    name = "sweep"

    def __init__(self, using: str, fair_claims_batch: int = FAIR_CLAIMS_BATCH) -> None:
        self.using = using
        self.fair_claims_batch = fair_claims_batch

    @property
    def interval(self) -> float:
        return get_settings().SWEEP_INTERVAL

    def run_once(self, now: datetime) -> int:
        moved = operations.sweep_everywhere(self.using, now)
        prune_after = get_settings().WORKER_PRUNE_AFTER
        Worker.objects.using(self.using).stale(now, prune_after).delete()
        operations.sweep_cancel_requests(self.using, now, get_settings().WORKER_STALE_AFTER)
        task_queues.close_orphaned_results(self.using, now)
        workflow_sweep.run(self.using, now)
        TaskResult.objects.using(self.using).filter(expires_at__lte=now).delete()
        operations.sweep_fair_claims(self.using, now, self.fair_claims_batch)
        if moved:
            logger.info("swept %d expired jobs to the dead letters", moved)
        return moved


class LeaderService:
    """The service of every worker that leads or may lead: each tick holds or tries to take
    leadership, and when leading runs each of `services` whose own interval has passed.

    A database error in any of them gives up leadership for this tick (the loop backs off,
    then re-checks it); any other error escapes, like any service's, and stops the worker.
    """

    name = "alk-leader"

    def __init__(self, leadership: Leadership, services: list[Service], stale_after: float) -> None:
        self.leadership = leadership
        self.services = services
        self.stale_after = stale_after
        self._last_run = [float("-inf")] * len(services)

    @property
    def interval(self) -> float:
        return min((service.interval for service in self.services), default=1.0)

    def run_once(self, now: datetime) -> bool:
        try:
            leading = self.leadership.acquire(now, self.stale_after)
        except Exception:
            self.leadership.held = False
            connections[self.leadership.using].close()  # drops the lock with the session
            raise
        if not leading:
            return False
        for index, service in enumerate(self.services):
            if time.monotonic() - self._last_run[index] >= service.interval:
                self._last_run[index] = time.monotonic()
                service.run_once(now)
        return True
