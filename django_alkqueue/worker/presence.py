"""This worker's row in the Worker table: written at start, refreshed every few seconds,
deleted at a clean exit. Rows that stop being refreshed show as stale and are pruned later."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path

from ..models import Worker
from ..reports.worker_stats import WorkerStats


class PresenceService:
    """The service that refreshes this worker's row every WORKER_HEARTBEAT_INTERVAL."""

    name = "alk-presence"

    def __init__(
        self,
        using: str,
        worker_id: str,
        queues: list[str],
        concurrency: int,
        stats: WorkerStats,
        interval: float,
        health_file: str | None = None,
    ) -> None:
        self.using = using
        self.worker_id = worker_id
        self.queues = queues
        self.concurrency = concurrency
        self.stats = stats
        self.interval = interval
        #: Touched after each heartbeat written: its age is the age of the last heartbeat.
        self.health_file = Path(health_file) if health_file else None

    def register(self, now: datetime) -> None:
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
        self._touch()

    def run_once(self, now: datetime) -> int:
        updated = (
            Worker.objects.using(self.using)
            .filter(worker_id=self.worker_id)
            .update(
                last_heartbeat_at=now,
                jobs_processed=self.stats.finished(),
                jobs_failed=self.stats.failed(),
            )
        )
        if not updated:  # pruned or deleted by an operator: come back
            self.register(now)
        else:
            self._touch()
        return updated

    def _touch(self) -> None:
        if self.health_file is not None:
            self.health_file.touch()

    def unregister(self) -> None:
        Worker.objects.using(self.using).filter(worker_id=self.worker_id).delete()
