"""The numbers an operator needs, computed once for `alk_status` and the admin overview."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.db.models import Count, Min, Q

from .conf import get_settings
from .models import Consumer, DeadLetter, QueueMessage, Worker


@dataclasses.dataclass(frozen=True)
class QueueRow:
    queue: str
    handler: str | None
    paused: bool
    pending: int
    scheduled: int
    claimed: int
    dead: int
    oldest_pending_age: float


@dataclasses.dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    hostname: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: datetime
    last_heartbeat_at: datetime
    jobs_processed: int
    jobs_failed: int
    is_leader: bool
    stale: bool


def queue_overview(using: str, now: datetime) -> list[QueueRow]:
    """One row per queue known from live jobs, dead letters or consumers. Three queries."""
    unclaimed = Q(claim_token__isnull=True)
    due = unclaimed & Q(run_at__lte=now)
    live: dict[str, dict[str, Any]] = {
        row["queue"]: dict(row)
        for row in QueueMessage.objects.using(using)
        .values("queue")
        .annotate(
            pending=Count("id", filter=due),
            scheduled=Count("id", filter=unclaimed & Q(run_at__gt=now)),
            claimed=Count("id", filter=Q(claim_token__isnull=False)),
            oldest=Min("run_at", filter=due),
        )
        .order_by()
    }
    dead = dict(
        DeadLetter.objects.using(using).values_list("queue").annotate(n=Count("id")).order_by()
    )
    consumers = {c.queue: c for c in Consumer.objects.using(using).all()}
    rows = []
    for name in sorted(set(live) | set(dead) | set(consumers)):
        counts = live.get(name, {})
        oldest = counts.get("oldest")
        consumer = consumers.get(name)
        rows.append(
            QueueRow(
                queue=name,
                handler=consumer.handler if consumer else None,
                paused=bool(consumer and consumer.paused),
                pending=counts.get("pending", 0),
                scheduled=counts.get("scheduled", 0),
                claimed=counts.get("claimed", 0),
                dead=dead.get(name, 0),
                oldest_pending_age=max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
            )
        )
    return rows


def worker_overview(using: str, now: datetime) -> list[WorkerRow]:
    stale_after = get_settings().WORKER_STALE_AFTER
    return [
        WorkerRow(
            worker_id=w.worker_id,
            hostname=w.hostname,
            pid=w.pid,
            queues=list(w.queues),
            concurrency=w.concurrency,
            started_at=w.started_at,
            last_heartbeat_at=w.last_heartbeat_at,
            jobs_processed=w.jobs_processed,
            jobs_failed=w.jobs_failed,
            is_leader=w.is_leader,
            stale=(now - w.last_heartbeat_at).total_seconds() > stale_after,
        )
        for w in Worker.objects.using(using).order_by("worker_id")
    ]
