"""This worker's row in the Worker table: written at start, refreshed every few seconds,
deleted at a clean exit. Rows that stop being refreshed show as stale and are pruned later."""

from __future__ import annotations

import os
import socket

from ..clock import Clock
from ..models import Worker
from .service import Service
from .stats import WorkerStats


class Presence(Service):
    name = "alk-presence"

    def __init__(
        self,
        using: str,
        worker_id: str,
        queues: list[str],
        concurrency: int,
        stats: WorkerStats,
        clock: Clock,
        interval: float,
    ) -> None:
        self.using = using
        self.worker_id = worker_id
        self.queues = queues
        self.concurrency = concurrency
        self.stats = stats
        self.clock = clock
        self.interval = interval

    def register(self) -> None:
        now = self.clock()
        Worker.objects.using(self.using).update_or_create(
            worker_id=self.worker_id,
            defaults={
                "hostname": socket.gethostname(),
                "pid": os.getpid(),
                "queues": self.queues,
                "concurrency": self.concurrency,
                "started_at": now,
                "last_heartbeat_at": now,
                "jobs_processed": 0,
                "jobs_failed": 0,
                "is_leader": False,
            },
        )

    def run_once(self) -> int:
        updated = (
            Worker.objects.using(self.using)
            .filter(worker_id=self.worker_id)
            .update(
                last_heartbeat_at=self.clock(),
                jobs_processed=self.stats.finished(),
                jobs_failed=self.stats.failed(),
            )
        )
        if not updated:  # pruned or deleted by an operator: come back
            self.register()
        return updated

    def unregister(self) -> None:
        Worker.objects.using(self.using).filter(worker_id=self.worker_id).delete()
