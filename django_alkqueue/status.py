"""The numbers an operator needs, computed once for `alk_status` and the admin overview."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Count, Min, Q, Sum
from django.db.models.functions import Substr

from . import flow_status
from .conf import get_settings
from .flow_status import FlowFigures, in_force
from .models import (
    CONSUMER_TABLE,
    DEAD_LETTER_TABLE,
    MESSAGE_TABLE,
    Consumer,
    DeadLetter,
    QueueMessage,
    QueueStat,
    Worker,
)


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
    #: Flow control: each limit in force as text (None: no limit), and where each comes
    #: from (code, settings, override); flow_status has the figures that go with them.
    limits: dict[str, str | None] = dataclasses.field(default_factory=dict)
    limit_sources: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def limited(self) -> bool:
        return any(value is not None for value in self.limits.values())


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
        limits = in_force(name, *((consumer.code_limits, consumer.limit_overrides)
                                  if consumer else (None, None)))  # fmt: skip
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
                limits=limits.limits.describe(),
                limit_sources=dict(limits.sources),
            )
        )
    return rows


def flow_overview(using: str, now: datetime, rows: Collection[QueueRow]) -> dict[str, FlowFigures]:
    """The flow figures of the queues among `rows` that have limits in force: one query for
    their Consumer rows, then two to four indexed queries each; none without limits."""
    limited = {row.queue: row for row in rows if row.limited}
    if not limited:
        return {}
    stored = {
        queue: (code, overrides)
        for queue, code, overrides in Consumer.objects.using(using)
        .filter(queue__in=list(limited))
        .values_list("queue", "code_limits", "limit_overrides")
    }
    return {
        name: flow_status.figures(
            using,
            name,
            now,
            in_force(name, *stored.get(name, (None, None))),
            row.pending,
            row.claimed,
        )
        for name, row in limited.items()
    }


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


# -- figures over the QueueStat minutes (the admin overview and its charts) -------------------


def minute_of(now: datetime) -> datetime:
    """The QueueStat minute that `now` falls in."""
    return now.replace(second=0, microsecond=0)


@dataclasses.dataclass(frozen=True)
class Throughput:
    """Jobs finished (succeeded) and failed attempts, over the current minute and those before."""

    finished_5m: int = 0
    failed_5m: int = 0
    finished_1h: int = 0
    failed_1h: int = 0


def throughput(using: str, now: datetime) -> dict[str, Throughput]:
    """Per queue: the last 5 and the last 60 QueueStat minutes (this one included). One query."""
    current = minute_of(now)
    recent = Q(minute__gte=current - timedelta(minutes=4))
    rows = (
        QueueStat.objects.using(using)
        .filter(minute__gte=current - timedelta(minutes=59))
        .values("queue")
        .annotate(
            finished_5m=Sum("finished", filter=recent),
            failed_5m=Sum("failed", filter=recent),
            finished_1h=Sum("finished"),
            failed_1h=Sum("failed"),
        )
        .order_by()
    )
    return {
        row["queue"]: Throughput(
            row["finished_5m"] or 0,
            row["failed_5m"] or 0,
            row["finished_1h"] or 0,
            row["failed_1h"] or 0,
        )
        for row in rows
    }


@dataclasses.dataclass(frozen=True)
class StatPoint:
    """One QueueStat minute of one queue, as the charts read it."""

    minute: datetime
    depth: int
    finished: int
    failed: int
    dead_lettered: int


def history(
    using: str,
    now: datetime,
    hours: float = 24,
    queue: str | None = None,
    queues: Collection[str] | None = None,
) -> dict[str, list[StatPoint]]:
    """Per queue (`queue` alone, or those in `queues`), its QueueStat minutes of the last
    `hours`, oldest first (index on minute)."""
    stats = QueueStat.objects.using(using).filter(minute__gt=now - timedelta(hours=hours))
    if queue is not None:
        stats = stats.filter(queue=queue)
    if queues is not None:
        stats = stats.filter(queue__in=list(queues))
    series: dict[str, list[StatPoint]] = {}
    for name, minute, pending, scheduled, claimed, finished, failed, dead in stats.order_by(
        "queue", "minute"
    ).values_list(
        "queue", "minute", "pending", "scheduled", "claimed", "finished", "failed", "dead_lettered"
    ):
        point = StatPoint(minute, pending + scheduled + claimed, finished, failed, dead)
        series.setdefault(name, []).append(point)
    return series


# -- the dead letters of one queue --------------------------------------------------------------

#: Dead letters read to group a queue's errors: its most recent ones (index (queue, died_at)).
ERROR_SAMPLE = 1000


@dataclasses.dataclass(frozen=True)
class ErrorGroup:
    headline: str  # the first line of the error: "ExceptionClass: message"
    reason: str
    count: int
    last_seen: datetime


def frequent_errors(using: str, queue: str, limit: int = 10) -> tuple[list[ErrorGroup], int]:
    """The most frequent first lines of error among the queue's latest ERROR_SAMPLE dead
    letters, with counts; and how many dead letters were read."""
    rows = list(
        DeadLetter.objects.using(using)
        .filter(queue=queue)
        .order_by("-died_at")
        .annotate(head=Substr("last_error", 1, 300))
        .values_list("head", "reason", "died_at")[:ERROR_SAMPLE]
    )
    counts: Counter[tuple[str, str]] = Counter()
    last_seen: dict[tuple[str, str], datetime] = {}
    for head, reason, died_at in rows:
        key = ((head or reason).split("\n", 1)[0].strip(), reason)
        counts[key] += 1
        last_seen.setdefault(key, died_at)
    groups = [
        ErrorGroup(headline, reason, n, last_seen[(headline, reason)])
        for (headline, reason), n in counts.most_common(limit)
    ]
    return groups, len(rows)


# -- queue names, cheaply --------------------------------------------------------------------

# A loose index scan: each step asks an index for the next name after the last one, so the
# cost grows with the number of queues, not of rows. One statement; the same SQL runs on both
# vendors. The scans walk both partial indexes of the live table and the dead letters' index.
_NEXT_NAME = """{cte}(queue) AS (
    SELECT MIN(queue) FROM {table} WHERE {where}
    UNION ALL
    SELECT (SELECT MIN(queue) FROM {table} WHERE {where} AND queue > {cte}.queue)
    FROM {cte} WHERE {cte}.queue IS NOT NULL
)"""
_QUEUE_SCANS = (
    ("unclaimed", MESSAGE_TABLE, "claim_token IS NULL"),  # PENDING_INDEX
    ("claimed", MESSAGE_TABLE, "claim_token IS NOT NULL"),  # LEASE_INDEX
    ("dead", DEAD_LETTER_TABLE, "1 = 1"),  # alkqueue_dead_queue_idx
)
KNOWN_QUEUES_SQL = (
    "WITH RECURSIVE "
    + ",\n".join(_NEXT_NAME.format(cte=c, table=t, where=w) for c, t, w in _QUEUE_SCANS)
    + "\n"
    + "\nUNION ".join(f"SELECT queue FROM {c} WHERE queue IS NOT NULL" for c, _, _ in _QUEUE_SCANS)
    + f"\nUNION SELECT queue FROM {CONSUMER_TABLE}"
)


def known_queues(using: str) -> list[str]:
    """Every queue named by a consumer, a live job or a dead letter, sorted; no table scan."""
    with connections[using].cursor() as cursor:
        cursor.execute(KNOWN_QUEUES_SQL)
        return sorted(row[0] for row in cursor.fetchall())
