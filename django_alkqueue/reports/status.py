"""The numbers an operator needs, computed once for `alk_status` and the admin overview: a row
per queue, per worker and per running job with progress, and each queue's oldest pending
job. The QueueStat minutes are in queue_stats.py, the error groups in frequent_errors.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Count, Exists, Min, OuterRef, Q, TextField
from django.db.models.functions import Cast

from .. import task_queues
from ..conf import get_settings
from ..consumers import registry
from ..jobs import Progress, stored_progress
from ..models import Consumer, DeadLetter, JobStep, QueueMessage, Worker
from ..sql import dialect_for
from ..steps import SLEEP_UNTIL
from . import flow_status
from .flow_status import FlowFigures, in_force


@dataclasses.dataclass(frozen=True)
class QueueRow:
    queue: str
    #: The handler a worker bound (the Consumer row), else the one the code binds.
    handler: str | None
    paused: bool
    pending: int
    scheduled: int
    claimed: int
    dead: int
    oldest_pending_age: float
    #: Live jobs waiting for their dependencies (docs/workflows.md) or for a signal
    #: (docs/durable-steps.md); not in `scheduled`.
    waiting: int = 0
    #: The scheduled jobs that sleep (job.sleep): counted in `scheduled` too (sleeping_counts).
    sleeping: int = 0
    #: A worker has served the queue (it wrote the Consumer row). False with a handler: the
    #: code binds one, but no worker has started on the queue yet.
    served: bool = False
    #: Flow control: each limit in force as text (None: no limit), and where each comes
    #: from (code, settings, override); flow_status has the figures that go with them.
    limits: dict[str, str | None] = dataclasses.field(default_factory=dict)
    limit_sources: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def limited(self) -> bool:
        return any(value is not None for value in self.limits.values())


def code_handler(name: str) -> str | None:
    """The dotted path of the handler this process's code binds to queue `name`: its
    @consumer, or the Tasks backend's runner for a task queue; None when there is none."""
    spec = registry.get(name)
    if spec is not None:
        return spec.path
    task = task_queues.spec(name)
    return task.path if task is not None else None


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


def live_counts(using: str, now: datetime) -> dict[str, dict[str, Any]]:
    """Per queue with live jobs: pending, scheduled, waiting, claimed and sleeping counts
    and the oldest due run_at. Three queries: two each over one partial index and only its
    columns (queue, run_at), so PostgreSQL can answer them from the index alone: the
    unclaimed rows from alkqueue_pending_idx, the claimed ones from alkqueue_lease_idx;
    then sleeping_counts."""
    due = Q(run_at__lte=now)
    live: dict[str, dict[str, Any]] = {
        row["queue"]: {**row, "claimed": 0}
        for row in QueueMessage.objects.using(using)
        .unclaimed()
        .values("queue")
        .annotate(
            pending=Count("queue", filter=due),
            scheduled=Count("queue", filter=Q(run_at__gt=now)),
            waiting=Count("queue", filter=Q(run_at__isnull=True)),
            oldest=Min("run_at", filter=due),
        )
        .order_by()
    }
    claimed = QueueMessage.objects.using(using).claimed().values_list("queue")
    for name, n in claimed.annotate(n=Count("queue")).order_by():
        row = live.setdefault(
            name, {"queue": name, "pending": 0, "scheduled": 0, "waiting": 0, "oldest": None}
        )
        row["claimed"] = n
    for name, n in sleeping_counts(using, now).items():
        live[name]["sleeping"] = n
    return live


def sleeping_counts(using: str, now: datetime) -> dict[str, int]:
    """Per queue, the scheduled jobs that sleep: those whose last recorded step is a
    job.sleep (its value holds SLEEP_UNTIL). One query: the scheduled rows of
    alkqueue_pending_idx, each probing its steps by the unique index (job_id, name). A job
    woken whose handler failed before recording another step, scheduled for its retry,
    still counts as sleeping (docs/admin.md)."""
    steps = JobStep.objects.using(using)
    later = steps.filter(job_id=OuterRef("job_id"), recorded_at__gt=OuterRef("recorded_at"))
    # The column is JSON text (fields.PayloadField): a sleep's record starts with its key.
    slept = steps.annotate(text=Cast("value", TextField())).filter(
        job_id=OuterRef("pk"), text__startswith=f'{{"{SLEEP_UNTIL}":'
    )
    rows = (
        QueueMessage.objects.using(using)
        .unclaimed()
        .filter(run_at__gt=now)
        .filter(Exists(slept.exclude(Exists(later))))
        .values_list("queue")
        .annotate(n=Count("queue"))
        .order_by()
    )
    return dict(rows)


def queue_overview(using: str, now: datetime) -> list[QueueRow]:
    """One row per queue known from live jobs, dead letters or consumers. Four queries, over
    indexes (live_counts; alkqueue_dead_queue_idx) and the consumers."""
    live = live_counts(using, now)
    dead = dict(
        DeadLetter.objects.using(using).values_list("queue").annotate(n=Count("queue")).order_by()
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
                handler=consumer.handler if consumer else code_handler(name),
                paused=bool(consumer and consumer.paused),
                served=consumer is not None,
                pending=counts.get("pending", 0),
                scheduled=counts.get("scheduled", 0),
                waiting=counts.get("waiting", 0),
                sleeping=counts.get("sleeping", 0),
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


@dataclasses.dataclass(frozen=True)
class RunningRow:
    """A claimed job whose handler reported progress (job.progress())."""

    job_id: int
    queue: str
    worker_id: str | None
    claimed_at: datetime | None
    progress: Progress


#: The most running jobs alk_status lists.
RUNNING_SHOWN = 20


def running_overview(using: str, limit: int = RUNNING_SHOWN) -> list[RunningRow]:
    """The running jobs with progress, the latest reports first; claimed rows only
    (alkqueue_lease_idx holds them)."""
    rows = (
        QueueMessage.objects.using(using)
        .claimed()
        .filter(progress_at__isnull=False)
        .order_by("-progress_at")
        .values_list("id", "queue", "claimed_by", "claimed_at", "progress", "progress_at")
    )
    running = []
    for job_id, queue, worker_id, claimed_at, stored, at in rows[:limit]:
        progress = stored_progress(stored, at)
        if progress is not None:
            running.append(RunningRow(job_id, queue, worker_id, claimed_at, progress))
    return running


# -- queue names and each queue's oldest pending job, cheaply ----------------------------------


def known_queues(using: str) -> list[str]:
    """Every queue named by a consumer, a live job or a dead letter, sorted; no table scan
    (Dialect.known_queues)."""
    connection = connections[using]
    return dialect_for(connection).known_queues(connection)


def oldest_pending_ages(
    using: str, now: datetime, queues: Collection[str] | None = None
) -> dict[str, float]:
    """Seconds the oldest due job of each queue has waited past its run_at: only queues with a
    due job appear. One statement of index probes (Dialect.first_unclaimed_run_at); `queues`
    limits it to those queues, and an empty collection reads nothing."""
    if queues is not None and not queues:
        return {}
    connection = connections[using]
    first = dialect_for(connection).first_unclaimed_run_at(connection, queues)
    return {name: (now - at).total_seconds() for name, at in first.items() if at <= now}
